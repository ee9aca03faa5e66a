-- depends: 0015_run_reviews
-- Events received per 10 seconds (the dashboard's throughput chart). A view, so
-- that analysts read the rate without the event log's bytes: the analysts' role
-- (judgeflow migrate --roles) has no SELECT on raw_events itself.
-- Example: SELECT slot, events FROM event_throughput ORDER BY slot DESC LIMIT 90;
CREATE VIEW event_throughput AS
SELECT date_bin('10 seconds', received_at, TIMESTAMPTZ 'epoch') AS slot, count(*) AS events
FROM raw_events
GROUP BY 1;
