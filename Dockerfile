# switchyard: multi-stage build, small non-root runtime image.
#   docker build -t switchyard .
#   docker run -p 8080:8080 -p 127.0.0.1:9090:9090 -v $PWD/switchyard.yaml:/etc/switchyard/switchyard.yaml:ro switchyard
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# protoc: the etcd client's build compiles etcd's .proto files.
RUN apt-get update && apt-get install -y --no-install-recommends protobuf-compiler \
    && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cargo build --release --locked -p switchyard --bin switchyard

FROM debian:bookworm-slim
# CA roots come with the binary (webpki-roots); nothing else is needed at run time.
RUN useradd --system --uid 10001 --home-dir /var/lib/switchyard --create-home switchyard
COPY --from=build /src/target/release/switchyard /usr/local/bin/switchyard
USER 10001:10001
WORKDIR /var/lib/switchyard
EXPOSE 8080 9090
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/switchyard"]
CMD ["serve", "--config", "/etc/switchyard/switchyard.yaml"]
