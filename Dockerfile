# cloudlib: the gateway and its embedded service in one image.
#   docker build -t cloudlib .
#   docker run --rm -p 8080:8080 -v cloudlib-data:/data cloudlib
# The FUSE mount inside a container needs: --device /dev/fuse --cap-add SYS_ADMIN --security-opt apparmor:unconfined
FROM node:20-bookworm-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends fuse3 libfuse3-dev pkg-config python3 make g++ ca-certificates \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
# The FUSE engine: an N-API addon built against libfuse 3 and the image's Node headers.
COPY native ./native
RUN npm run build:fuse3 -- --nodedir=/usr/local
COPY bin ./bin
COPY src ./src
COPY tsconfig.json ./

ENV CLOUDLIB_HOME=/data NODE_ENV=production
VOLUME ["/data"]
EXPOSE 8080
# WebDAV on all interfaces inside the container; the mount is off unless /dev/fuse is passed in.
ENTRYPOINT ["node", "bin/cloudlib.js"]
CMD ["up", "--data", "/data", "--webdav", "0.0.0.0:8080", "--no-mount"]
