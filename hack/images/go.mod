// Module images builds the container images the end-to-end tests load into
// a cluster's containerd, from binaries built on the host, with no Docker
// engine and no registry.
module github.com/kubeskills/kubeskills/hack/images

go 1.26.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/opencontainers/go-digest v1.0.1-0.20220411205349-bde1400a84be // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
)
