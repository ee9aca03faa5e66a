-- depends: 0006_operations 0007_views
-- The projection dead letter: a record the projector could not turn into rows
-- (stage 'decode') or whose rows Postgres refused (stage 'write': a data,
-- constraint or size error on that record, never an outage). The record's
-- coordinates, its bytes and why; everything after it is projected. A
-- `judgeflow rebuild` after the cause is fixed projects it like any other.

CREATE TABLE projection_rejects (
  topic        TEXT        NOT NULL,
  partition    INTEGER     NOT NULL,
  "offset"     BIGINT      NOT NULL,
  key          BYTEA,
  value        BYTEA,                  -- the record's bytes, exactly
  stage        TEXT        NOT NULL CHECK (stage IN ('decode', 'write')),
  code         TEXT        NOT NULL,   -- PROJECTION_REFUSED or PROJECTION_UNDECODABLE
  sqlstate     TEXT,                   -- Postgres's error code, for stage 'write'
  error        TEXT        NOT NULL,   -- the error's first line
  received_at  TIMESTAMPTZ NOT NULL,   -- the Kafka record timestamp (replays agree)
  PRIMARY KEY (topic, partition, "offset")
);
DO $$ BEGIN PERFORM make_insert_only('projection_rejects'); END $$;

-- Dead letters by code now count the projection's too (PROJECTION_REFUSED,
-- PROJECTION_UNDECODABLE) beside the contract's: one place to look.
CREATE OR REPLACE VIEW dead_letters_by_code AS
SELECT code, count(*) AS events FROM (
  SELECT code FROM invalid_events, unnest(error_codes) AS code
  UNION ALL
  SELECT code FROM projection_rejects
) AS dead
GROUP BY code ORDER BY events DESC, code;
