# syntax=docker/dockerfile:1
# Ferry's operator image: one static (musl) binary on distroless, run as
# UID/GID 65532 (distroless's `nonroot`), matching deploy/'s securityContext.
#
#   docker build -t ghcr.io/ferry-dev/ferry:0.1.0 .

FROM rust:1-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl \
 && apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The whole workspace: the binary's dev-dependencies and the sandbox crate are
# workspace members, and --locked needs Cargo.lock as committed.
COPY . .
# rustls with ring and no OpenSSL, so musl links statically without extra
# libraries. The cache mounts keep the registry and target dir between builds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --target x86_64-unknown-linux-musl --bin ferry \
 && cp target/x86_64-unknown-linux-musl/release/ferry /ferry

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /ferry /ferry
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/ferry"]
CMD ["run"]
