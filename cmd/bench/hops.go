package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/services/catalogue/postgres/db"
)

// The hops floor answers the same request through the same four round trips
// as the gateway, and nothing else: a front process makes the rate
// limiter's Redis call (the same GCRA script, through the same library) and
// POSTs the plan id to a back process, which runs the catalogue's own GetPlan
// query on the catalogue's database and answers the plan's bytes. No
// authentication, Twirp, protobuf, JSON, validation, instrumentation or
// logging. It prices the hops the issue prescribes, so the gateway's own
// overhead is the distance between the two rows, and the bare handler's
// distance from this row is the cost of the architecture itself.
const (
	serveFloorFlag = "serve-floor"
	floorFront     = "front"
	floorBack      = "back"
)

// floorConfig is what a floor child needs; the parent passes it as flags.
type floorConfig struct {
	role     string // front or back
	body     string // file holding the bytes to answer (back)
	redisURL string // front
	upstream string // back's base URL (front)
	dbURL    string // catalogue database (back)
}

func (c *floorConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.role, serveFloorFlag, "", "internal: serve one hop of the hops floor (`front` or `back`)")
	fs.StringVar(&c.upstream, "floor-upstream", "", "internal: the floor back's base URL, for the front")
	fs.StringVar(&c.dbURL, "floor-db", "", "internal: the catalogue database URL, for the floor back")
	fs.StringVar(&c.body, "floor-body", "", "internal: the `file` the floor back answers with")
}

func (c floorConfig) args() []string {
	switch c.role {
	case floorFront:
		return []string{"-" + serveFloorFlag, floorFront, "-floor-upstream", c.upstream, "-redis-url", c.redisURL}
	default:
		return []string{"-" + serveFloorFlag, floorBack, "-floor-db", c.dbURL, "-floor-body", c.body}
	}
}

// floorHandler builds the handler of one floor hop and a func releasing its
// connections.
func floorHandler(ctx context.Context, c floorConfig) (http.Handler, func(), error) {
	switch c.role {
	case floorFront:
		opts, err := redis.ParseURL(c.redisURL)
		if err != nil {
			return nil, nil, err
		}
		rdb := redis.NewClient(opts)
		limiter := redis_rate.NewLimiter(rdb)
		upstream := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 10 * time.Second}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := limiter.Allow(r.Context(), "bench:floor", redis_rate.PerMinute(1_000_000_000)); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			id := r.URL.Path[len(r.URL.Path)-36:]
			resp, err := upstream.Post(c.upstream+"/plan", "text/plain", bytes.NewReader([]byte(id)))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		})
		return h, func() { _ = rdb.Close() }, nil
	case floorBack:
		body, err := os.ReadFile(c.body)
		if err != nil {
			return nil, nil, err
		}
		// Connected as the catalogue connects, minus tracing.
		pool, err := libpostgres.Connect(ctx, c.dbURL)
		if err != nil {
			return nil, nil, err
		}
		queries := db.New(pool)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			raw, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			id, err := uuid.ParseBytes(raw)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if _, err := queries.GetPlan(r.Context(), id); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			_, _ = w.Write(body)
		})
		return h, pool.Close, nil
	}
	return nil, nil, fmt.Errorf("unknown floor role %q", c.role)
}

// serveChild serves h on a loopback port it announces on stdout, until
// SIGTERM or its parent goes away (stdin closes).
func serveChild(ctx context.Context, h http.Handler, stdout io.Writer, stdin io.Reader) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
