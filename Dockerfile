# syntax=docker/dockerfile:1
#
# floe in one image: the catalog (`floe serve`), ingestion (`floe ingest`), maintenance (`floe maintain`)
# and the admin CLI (`floe apply`, `floe keys`, ...). Python 3.11 and a Java 17 JDK for Spark (a JDK, not
# only a JRE: ingestion compiles floe's protobuf decoder, ingest/jvm, with javac).
#
#   docker build -t floe:local .
#   docker run --rm -p 8181:8181 floe:local serve --host 0.0.0.0      # catalog on SQLite in /var/lib/floe
#
# Spark's connector jars (Iceberg, Kafka, Avro, S3; pinned with SHA-1 in runtime/spark.py) are downloaded
# from Maven Central at build time into /var/cache/floe/jars, and floe's protobuf decoder is compiled into
# /var/cache/floe/jvm, so ingestion and maintenance start offline.
# `--build-arg PREFETCH_JARS=false` builds a smaller image instead: the jars are then downloaded on first
# run into FLOE_CACHE_DIR (mount a volume there to keep them; compose.yml does).

# Bookworm: the Debian release that packages Java 17.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FLOE_HOME=/var/lib/floe \
    FLOE_CACHE_DIR=/var/cache/floe

# The JDK's package scripts expect the man directory that slim images leave out.
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jdk-headless \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/floe floe \
    && mkdir -p /var/lib/floe /var/cache/floe \
    && chown floe:floe /var/lib/floe /var/cache/floe

WORKDIR /opt/floe
# floe's dependencies (PySpark alone is ~430 MB) in a layer of their own, keyed on pyproject.toml only:
# a change to floe's code does not download them again. pip's cache is a build cache mount, kept by the
# builder between builds and never part of the image.
COPY pyproject.toml ./
RUN --mount=type=cache,target=/root/.cache/pip \
    python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" \
        > requirements.txt \
    && pip install -r requirements.txt
COPY README.md ./
COPY floe ./floe
COPY catalog ./catalog
COPY ingest ./ingest
COPY maintenance ./maintenance
COPY runtime ./runtime
COPY devtools ./devtools
RUN --mount=type=cache,target=/root/.cache/pip pip install . && rm -rf /opt/floe

USER floe
WORKDIR /var/lib/floe
# Declared here, not at the top: a build argument is part of the cache key of every RUN after it, so
# both values share all the layers above.
ARG PREFETCH_JARS=true
RUN if [ "$PREFETCH_JARS" = "true" ]; then \
        python -c "from runtime.spark import spark_jars; spark_jars()" \
        && python -c "from ingest.jvm_decoder import decoder_jar; decoder_jar()"; \
    fi

EXPOSE 8181
ENTRYPOINT ["floe"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8181"]
