// Command esimctl is the operator CLI of the eSIM platform: accounts, API
// keys, the plan catalogue, balances and orders, over the services' Twirp
// APIs. Every command takes --json for scripts.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
