# The image mount/boundfs-daemonset.yaml runs (registry.example.com/boundfs:0.1.0):
#
#   docker build -t registry.example.com/boundfs:0.1.0 .
#
# Its start command is mount/boundfs-start.sh (installed as
# /usr/local/bin/boundfs-start): it detaches the dead mount a crashed
# predecessor left at MOUNTPOINT, then runs boundfs -f. No Docker engine runs
# in CI: tests/sh/daemon/container-start.sh builds the binary with this file's
# `cargo build` line and runs the start command as the manifest gives it,
# twice, with a SIGKILL between.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked

FROM debian:bookworm-slim
# umount(8) (util-linux's mount package) detaches a dead mount; awk reads mountinfo
RUN apt-get update && apt-get install -y --no-install-recommends mount mawk && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/boundfs /usr/local/bin/boundfs
COPY mount/boundfs-start.sh /usr/local/bin/boundfs-start
ENTRYPOINT ["/usr/local/bin/boundfs-start"]
