package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
)

// receivedView is one delivery in listen --json output: a JSON object per
// line, as deliveries arrive.
type receivedView struct {
	ID       string          `json:"id"`
	Event    string          `json:"event"`
	Verified bool            `json:"verified"`
	Error    *string         `json:"error"`
	Body     json.RawMessage `json:"body"`
}

// maxDeliveryBody bounds what listen reads of a delivery.
const maxDeliveryBody = 1 << 20

// defaultListenAddr is the one address of this machine that make run's
// webhook service lets sandbox deliveries reach (SANDBOX_PRIVATE_ENDPOINTS
// in services.yaml).
const defaultListenAddr = "127.0.0.1:9999"

func (c *cli) webhooksListenCommand() *cobra.Command {
	var account, env, addr string
	var status, count int
	cmd := &cobra.Command{
		Use:   "listen --account ID --env sandbox|live [--addr " + defaultListenAddr + "] [--status 204] [--count N]",
		Short: "Receive an account's deliveries here, verified as a partner's endpoint would",
		Long: `Start a webhook receiver on this machine, set it as the account's URL for
--env, and print every delivery as it arrives, verified with the public
Standard Webhooks library against the account's signing secret: what a
partner's endpoint does. It answers each delivery with --status (204 by
default; 500 shows the retries in GET /v1/events and esimctl events list).
It stops after --count deliveries, or on Ctrl-C, and leaves its URL set:
set the partner's URL back with esimctl webhooks set.

For development with make run, whose webhook service lets sandbox
deliveries reach this machine at ` + defaultListenAddr + `, the default --addr,
and at no other address (SANDBOX_PRIVATE_ENDPOINTS in services.yaml): with
another --addr, list it there too, or every delivery is refused. A live URL
must be public https, which this receiver is not.`,
		Example: `  esimctl webhooks listen --account de300000-0000-4000-8000-00000000d3e0 --env sandbox
  esimctl webhooks listen --account 0193... --env sandbox --status 500 --count 3 --json   # a JSON object per delivery, per line`,
		Args: exactArgs(),
	}
	webhookScopeFlags(cmd, &account, &env)
	cmd.Flags().StringVar(&addr, "addr", defaultListenAddr, "host:port to listen on; make run's webhook service reaches "+defaultListenAddr+" only (SANDBOX_PRIVATE_ENDPOINTS)")
	cmd.Flags().IntVar(&status, "status", http.StatusNoContent, "HTTP status to answer every delivery with")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many deliveries (0: until Ctrl-C)")
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		scope, err := parseWebhookScope(account, env)
		if err != nil {
			return err
		}
		if status < 200 || status > 599 {
			return usagef("invalid --status %d: want an HTTP status, 200 to 599", status)
		}
		if count < 0 {
			return usagef("invalid --count %d: want 0 (no limit) or more", count)
		}
		if _, err := c.requireAccount(ctx, scope.GetAccountId()); err != nil {
			return err
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return &failure{msg: fmt.Sprintf("listen on %s: %v", addr, err)}
		}
		defer ln.Close()
		target := "http://" + ln.Addr().String() + "/webhooks"
		e, err := c.webhook().SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: target})
		if err != nil {
			return c.callFailed(fmt.Sprintf("set the %s webhook URL of account %s to %s", scope.GetEnvironment().ShortName(), scope.GetAccountId(), target), "webhook", err)
		}
		verifier, err := standardwebhooks.NewWebhook(e.GetSecret())
		if err != nil {
			return fmt.Errorf("the webhook service's secret does not parse: %w", err)
		}
		fmt.Fprintf(c.stderr, "esimctl: receiving the %s deliveries of account %s at %s (Ctrl-C stops)\n",
			scope.GetEnvironment().ShortName(), scope.GetAccountId(), target)

		// Serving outlives --timeout, which bounds the call above: it
		// ends with the command's own context (Ctrl-C) or --count.
		serveCtx, stop := context.WithCancel(cmd.Context())
		defer stop()
		var mu sync.Mutex
		received := 0
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxDeliveryBody))
			if err != nil {
				http.Error(w, "read body", http.StatusBadRequest)
				return
			}
			v := receivedView{ID: r.Header.Get("webhook-id"), Body: body}
			var envelope struct {
				Event string `json:"event"`
			}
			_ = json.Unmarshal(body, &envelope)
			v.Event = envelope.Event
			if verr := verifier.Verify(body, r.Header); verr != nil {
				msg := verr.Error()
				v.Error = &msg
			} else {
				v.Verified = true
			}
			w.WriteHeader(status)
			mu.Lock()
			defer mu.Unlock()
			c.printReceived(v, status)
			if received++; count > 0 && received >= count {
				stop()
			}
		})
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-serveCtx.Done()
			shutdown, cancel := context.WithTimeout(context.WithoutCancel(serveCtx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return &failure{msg: fmt.Sprintf("serve %s: %v", target, err)}
		}
		return nil
	})
	return cmd
}

// printReceived writes one delivery: a JSON line with --json, a line for a
// human otherwise.
func (c *cli) printReceived(v receivedView, status int) {
	if c.json {
		line, _ := json.Marshal(v)
		fmt.Fprintln(c.stdout, string(line))
		return
	}
	verdict := "verified"
	if !v.Verified {
		verdict = "NOT VERIFIED (" + *v.Error + ")"
	}
	fmt.Fprintf(c.stdout, "%s %s %s, answered %d\n", time.Now().UTC().Format(time.RFC3339), v.Event, v.ID, status)
	fmt.Fprintf(c.stdout, "  signature: %s\n  body: %s\n", verdict, v.Body)
}
