"""The review desk: where a person reviews the claims the pipeline routed to them (DESIGN decision 14).

- `leases`: the queue (a read model the projector keeps) and the desk's only state, its leases, in Postgres;
- `reviewer`: who the reviewer is (a fixed name on loopback, or a trusted proxy's header);
- `api`: the public JSON API and the page, on aiohttp; a submit is published to `reviews` with acks=all;
- `page`: the page itself, blind first and keyboard first.
"""
