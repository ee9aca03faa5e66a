-- depends: 0001_raw_events
-- Dead letters, every routing decision, and the projector's Kafka offsets,
-- stored in the same transaction as the rows they produced.

CREATE TABLE invalid_events (
  event_id            UUID PRIMARY KEY,
  contract            TEXT NOT NULL,
  source_topic        TEXT NOT NULL,
  source_partition    INTEGER NOT NULL,
  source_offset       BIGINT NOT NULL,
  source_key          BYTEA,
  error_codes         TEXT[] NOT NULL CHECK (cardinality(error_codes) >= 1),
  errors              JSONB NOT NULL,
  original            BYTEA NOT NULL,
  original_size       INTEGER NOT NULL,
  original_sha256     TEXT NOT NULL,
  original_truncated  BOOLEAN NOT NULL,
  received_at         TIMESTAMPTZ NOT NULL,
  UNIQUE (source_topic, source_partition, source_offset)
);
DO $$ BEGIN PERFORM make_insert_only('invalid_events'); END $$;
CREATE INDEX idx_invalid_events_codes ON invalid_events USING gin (error_codes);

CREATE TABLE routing_decisions (
  event_id           UUID PRIMARY KEY,
  subject            TEXT NOT NULL CHECK (subject IN ('claim', 'evaluation')),
  claim_id           TEXT,
  evaluation_run_id  UUID,
  route              TEXT NOT NULL CHECK (route IN ('done', 'second_judge', 'human_review')),
  reason             TEXT NOT NULL,
  verdict            TEXT CHECK (verdict IN ('pass', 'fail', 'unclear')),
  score              DOUBLE PRECISION,
  confidence         DOUBLE PRECISION,
  judge_ids          TEXT[] NOT NULL,
  input_ids          TEXT[] NOT NULL,
  policy             JSONB,
  aggregation_mode   TEXT,
  tie_rule           TEXT,
  agreement          DOUBLE PRECISION,
  decided_at         TIMESTAMPTZ NOT NULL,
  CHECK ((subject = 'claim') = (claim_id IS NOT NULL))
);
DO $$ BEGIN PERFORM make_insert_only('routing_decisions'); END $$;
CREATE INDEX idx_routing_decisions_claim ON routing_decisions(claim_id);

CREATE TABLE projection_offsets (
  consumer     TEXT NOT NULL,
  topic        TEXT NOT NULL,
  partition    INTEGER NOT NULL,
  next_offset  BIGINT NOT NULL,
  PRIMARY KEY (consumer, topic, partition)
);
