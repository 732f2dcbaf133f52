package es2plus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/es2plus"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

// holdingNetwork is a mutual-TLS proxy in front of the simulator's network
// API that holds every bundle call for one ICCID until released: one
// partner's top-ups stuck at the network.
type holdingNetwork struct {
	iccid   atomic.Value // string
	held    atomic.Int32
	release chan struct{}
}

func (h *holdingNetwork) start(t *testing.T, sim *smdpsimtest.Sim) string {
	t.Helper()
	clientTLS, err := sim.Certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	upstream := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS}}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var b struct {
			ICCID string `json:"iccid"`
		}
		if json.Unmarshal(body, &b) == nil && b.ICCID != "" && b.ICCID == h.iccid.Load() {
			h.held.Add(1)
			select {
			case <-h.release:
			case <-r.Context().Done():
				return
			}
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, sim.NetworkURL+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		res, err := upstream.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, res.Body)
	}))
	tlsConfig, err := es2plus.ServerTLS(sim.Certs.ServerCert, sim.Certs.ServerKey, sim.Certs.CACert)
	if err != nil {
		t.Fatal(err)
	}
	ts.TLS = tlsConfig
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts.URL
}

// One partner's live top-ups stuck at the network hold no more than the
// account's places in flight: its next top-up is refused at once
// (ErrTooManyInFlight, nothing charged), while another partner's top-up
// goes through meanwhile; once the network answers, the stuck ones
// complete, each charged once.
func TestOnePartnersStuckTopUpsLeaveAnotherAlone(t *testing.T) {
	h := &holdingNetwork{release: make(chan struct{})}
	var released sync.Once
	release := func() { released.Do(func() { close(h.release) }) }
	t.Cleanup(release)
	r := newLiveRigVia(t, func(sim *smdpsimtest.Sim) string { return h.start(t, sim) })
	ctx := context.Background()

	stuck := r.order(ordering.Live)
	h.iccid.Store(stuck.ICCID)
	other := uuid.New()
	r.deps.TopUp(t, other.String(), accountsv1.Environment_ENVIRONMENT_LIVE, "USD", 1000_00, "funds")
	created, err := r.svc.CreateOrder(ctx, ordering.NewOrder{Scope: ordering.Scope{AccountID: other, Environment: ordering.Live}, Currency: ordering.USD, PlanID: japan5GB})
	if err != nil || created.Order.Status != ordering.StatusCompleted {
		t.Fatalf("the other partner's order = %+v, %v", created.Order, err)
	}
	theirs := created.Order.Esims[0]

	const places = ordering.DefaultMaxInFlight
	results := make(chan error, places)
	for i := range places {
		go func() {
			_, err := r.svc.CreateTopUp(ctx, ordering.NewTopUp{Scope: stuck.Scope, Currency: ordering.USD, IdempotencyKey: fmt.Sprint("stuck-", i), EsimID: stuck.ID, PlanID: japan5GB})
			results <- err
		}()
	}
	for deadline := time.Now().Add(30 * time.Second); h.held.Load() < places; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d top-ups reached the network, want %d", h.held.Load(), places)
		}
		select {
		case err := <-results:
			t.Fatalf("a top-up of the stuck partner ended before the network answered: %v", err)
		default:
		}
	}
	before := r.deps.Ledger(t, r.account.String(), accountsv1.Environment_ENVIRONMENT_LIVE, "USD")
	_, err = r.svc.CreateTopUp(ctx, ordering.NewTopUp{Scope: stuck.Scope, Currency: ordering.USD, IdempotencyKey: "one-more", EsimID: stuck.ID, PlanID: japan5GB})
	if !errors.Is(err, ordering.ErrTooManyInFlight) {
		t.Errorf("a top-up over the account's places = %v, want ErrTooManyInFlight", err)
	}
	if after := r.deps.Ledger(t, r.account.String(), accountsv1.Environment_ENVIRONMENT_LIVE, "USD"); after.Balance != before.Balance {
		t.Errorf("the refused top-up moved the balance from %d to %d", before.Balance, after.Balance)
	}

	// Bounded so that a top-up stuck behind the other partner's fails the
	// test rather than hanging it.
	theirCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	theirTopUp, err := r.svc.CreateTopUp(theirCtx, ordering.NewTopUp{Scope: theirs.Scope, Currency: ordering.USD, IdempotencyKey: "theirs", EsimID: theirs.ID, PlanID: japan5GB})
	if err != nil || theirTopUp.TopUp.Status != ordering.StatusCompleted {
		t.Fatalf("the other partner's top-up = %+v, %v", theirTopUp.TopUp, err)
	}
	if n := h.held.Load(); n != places {
		t.Errorf("%d of the stuck partner's top-ups held when the other's completed, want %d still waiting", n, places)
	}

	release()
	for range places {
		if err := <-results; err != nil {
			t.Errorf("a stuck top-up, once the network answered: %v", err)
		}
	}
	l := r.deps.Ledger(t, r.account.String(), accountsv1.Environment_ENVIRONMENT_LIVE, "USD")
	if l.TopUps-l.Debits+l.Refunds != l.Balance || l.Refunds != 0 || len(l.DebitsOf) != places+1 {
		t.Errorf("the stuck partner's ledger: %+v; want the order and %d top-ups debited once each", l, places)
	}
	for ref, n := range l.DebitsOf {
		if n != 1 {
			t.Errorf("%s debited %d times", ref, n)
		}
	}
}
