# judgeflow worker image (used by docker-compose.yml).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY streams ./streams
COPY projections ./projections
COPY judgeflow ./judgeflow
COPY migrations ./migrations
RUN pip install --no-cache-dir '.[rocksdb]'
ENV JUDGEFLOW_DATA_DIR=/data
VOLUME /data
ENTRYPOINT ["judgeflow"]
CMD ["worker"]
