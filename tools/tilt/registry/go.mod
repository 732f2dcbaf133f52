module github.com/esimplatform/esim/tools/registry

go 1.26.0

tool github.com/google/go-containerregistry/cmd/registry

require github.com/google/go-containerregistry v0.21.7 // indirect
