-- Every event of every input topic, as received. Insert-only: the database
-- itself refuses UPDATE, DELETE and TRUNCATE, so no code path can mutate one.

CREATE FUNCTION refuse_mutation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'judgeflow: % on % refused: this table is insert-only', TG_OP, TG_TABLE_NAME
    USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TABLE raw_events (
  topic          TEXT        NOT NULL,
  partition      INTEGER     NOT NULL CHECK (partition >= 0),
  "offset"       BIGINT      NOT NULL CHECK ("offset" >= 0),
  key            BYTEA,
  headers        JSONB       NOT NULL DEFAULT '[]',
  value          BYTEA,                 -- the original bytes, exactly
  value_json     JSONB,                 -- the same, when it decodes as a strict JSON object
  received_at    TIMESTAMPTZ NOT NULL,  -- the Kafka record timestamp (replays agree)
  PRIMARY KEY (topic, partition, "offset")
);

-- make_insert_only('t') installs the row and statement triggers on table t.
CREATE FUNCTION make_insert_only(tbl regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE TRIGGER insert_only BEFORE UPDATE OR DELETE ON %s '
                 'FOR EACH ROW EXECUTE FUNCTION refuse_mutation()', tbl);
  EXECUTE format('CREATE TRIGGER no_truncate BEFORE TRUNCATE ON %s '
                 'FOR EACH STATEMENT EXECUTE FUNCTION refuse_mutation()', tbl);
END
$$;

DO $$ BEGIN PERFORM make_insert_only('raw_events'); END $$;
