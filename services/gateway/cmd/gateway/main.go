// Command gateway serves the public partner API.
// It is configured only through environment variables (see server.Config).
package main

import (
	"context"
	"io"

	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/services/gateway/server"
)

func main() { service.Main("gateway", run) }

// run is the whole program; main only binds it to the process, so tests
// can run it with their own environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return service.Run(ctx, "gateway", server.New, args, getenv, stdout)
}
