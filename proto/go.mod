module github.com/esimplatform/esim/proto

go 1.26.0

require (
	github.com/twitchtv/twirp v8.1.3+incompatible
	google.golang.org/protobuf v1.36.12
)

require github.com/esimplatform/esim/libs v0.0.0-00010101000000-000000000000

replace github.com/esimplatform/esim/libs => ../libs
