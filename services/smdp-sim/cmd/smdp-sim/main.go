// Command smdp-sim is an SM-DP+ simulator serving the SGP.22 ES2+
// functions over mutual TLS, with a control API for tests. It is
// configured only through environment variables (see server.Config).
package main

import (
	"context"
	"io"

	"github.com/esimplatform/esim/libs/service"
	"github.com/esimplatform/esim/services/smdp-sim/server"
)

func main() { service.Main("smdp-sim", run) }

// run is the whole program; main only binds it to the process, so tests
// can run it with their own environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return service.Run(ctx, "smdp-sim", server.New, args, getenv, stdout)
}
