# judgeflow image (used by docker-compose.yml). The first stage builds the
# wheel, the second installs only that wheel: the image runs the package as pip
# ships it (SQL migrations inside it), with no checkout beside it to lean on.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY streams ./streams
COPY projections ./projections
COPY judgeflow ./judgeflow
COPY bench ./bench
COPY migrations ./migrations
RUN pip wheel --no-cache-dir --no-deps -w /dist .

FROM python:3.11-slim
COPY --from=build /dist /dist
RUN pip install --no-cache-dir "$(ls /dist/judgeflow-*.whl)[rocksdb]" && rm -rf /dist
ENV JUDGEFLOW_DATA_DIR=/data
VOLUME /data
WORKDIR /data
ENTRYPOINT ["judgeflow"]
CMD ["worker"]
