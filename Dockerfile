# cloudlib: the gateway and its embedded service in one image.
#   docker build -t cloudlib .
#   docker run --rm -p 8080:8080 -p 8081:8081 -p 8082:8082 -v cloudlib-data:/data cloudlib
# Ports: 8080 WebDAV, 8081 the embedded service (share links, previews, downloads), 8082 /metrics and
# /healthz. Links carry http://localhost:8081; for other machines run with
# -e CLOUDLIB_SERVICE_URL=http://HOST:8081 (the address they reach port 8081 by).
# The FUSE mount (on /app/mnt inside the container) starts when FUSE is usable there:
#   --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor:unconfined
# Without those, WebDAV and everything else run and the mount is left out.
# The WebDAV login is generated once and kept in the volume: docker exec CONTAINER cat /data/webdav-user.json
# Control commands: docker exec CONTAINER cloudlib ctl status
FROM node:20-bookworm-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends fuse3 libfuse3-dev pkg-config python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
# The FUSE engine: an N-API addon built against libfuse 3 and the image's Node headers.
COPY native ./native
RUN npm run build:fuse3 -- --nodedir=/usr/local
COPY tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY scripts/build.js ./scripts/build.js
COPY src ./src
# Compiled JavaScript (bin/cloudlib.js runs it; the sources stay beside it), then the build tools go.
RUN node scripts/build.js \
 && npm prune --omit=dev --no-audit --no-fund \
 && ln -s /app/bin/cloudlib.js /usr/local/bin/cloudlib \
 && mkdir -p /data /app/mnt \
 && chown node:node /data /app/mnt

ENV CLOUDLIB_HOME=/data NODE_ENV=production CLOUDLIB_SERVICE_URL=http://localhost:8081
# Runs as the image's unprivileged user; /data (the volume) and the mount point are its own.
USER node
VOLUME ["/data"]
EXPOSE 8080 8081 8082
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8082/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["cloudlib"]
# Every listener on all interfaces of the container; the mount where FUSE is usable (see above).
CMD ["up", "--data", "/data", "--webdav", "0.0.0.0:8080", "--service-listen", "0.0.0.0:8081", "--admin-listen", "0.0.0.0:8082"]
