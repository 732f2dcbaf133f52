module github.com/esimplatform/esim/libs/internalauth

go 1.26.0

require github.com/twitchtv/twirp v8.1.3+incompatible

require github.com/pkg/errors v0.9.1 // indirect
