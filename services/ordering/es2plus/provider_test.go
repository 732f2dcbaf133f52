package es2plus_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/es2plus"
	"github.com/esimplatform/esim/services/ordering/jobs"
	"github.com/esimplatform/esim/services/ordering/postgres"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

// providerRig is the live provider as ordering runs it: the real store on
// a database of its own, the real client, the simulator over mutual TLS.
type providerRig struct {
	t      *testing.T
	sim    *smdpsimtest.Sim
	pool   *pgxpool.Pool
	store  *postgres.Store
	client *es2plus.Client
	p      *es2plus.Provider
}

func newProviderRig(t *testing.T, vendors ...smdpsim.Vendor) *providerRig {
	t.Helper()
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "esim-travel:20", Vendors: vendors})
	pool := pgtest.New(t, postgres.Migrations)
	if err := libpostgres.MigrateRiver(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	store := postgres.NewStore(pool, 0)
	client := clientOf(t, sim, sim.Certs, sim.Certs)
	records := func(tx ordering.Locked) es2plus.Store { return store.Records(tx) }
	p := es2plus.NewProvider(client, records, es2plus.ProfileTypes{Default: "esim-travel"}, nil,
		es2plus.Settings{RetryBackoff: time.Hour, SMDPAddress: "smdp.configured.example"})
	return &providerRig{t: t, sim: sim, pool: pool, store: store, client: client, p: p}
}

// order stores a pending live order of quantity eSIMs.
func (r *providerRig) order(quantity int32) ordering.Order {
	r.t.Helper()
	fp := sha256.Sum256([]byte(uuid.NewString()))
	o := ordering.Order{
		ID: uuid.Must(uuid.NewV7()), Kind: ordering.KindEsims, Scope: ordering.Scope{AccountID: uuid.New(), Environment: ordering.Live}, Fingerprint: fp[:],
		PlanID: uuid.New(), PlanName: "Japan 5 GB", TotalBytes: 5 << 30, ValidityDays: 30,
		Quantity: quantity, Currency: ordering.USD, UnitMinor: 1000, TotalMinor: 1000 * int64(quantity),
		Status: ordering.StatusPending, CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
	r.locked(o.ID, func(ctx context.Context, l ordering.Locked) error { return l.InsertOrder(ctx, o) })
	return o
}

// locked runs fn under the order's lock, as ordering does: the provider's
// records go on the lock's connection.
func (r *providerRig) locked(id uuid.UUID, fn func(context.Context, ordering.Locked) error) {
	r.t.Helper()
	if err := r.store.WithLock(context.Background(), "ordering/order/"+id.String(), fn); err != nil {
		r.t.Fatal(err)
	}
}

func (r *providerRig) issue(o ordering.Order) ([]ordering.Profile, error) {
	var profiles []ordering.Profile
	var err error
	r.locked(o.ID, func(ctx context.Context, l ordering.Locked) error {
		profiles, err = r.p.Issue(ctx, l, ordering.IssueRequest{OrderID: o.ID, Environment: ordering.Live, Quantity: o.Quantity, PlanID: o.PlanID})
		return nil
	})
	return profiles, err
}

// held is what the simulator holds for anyone: profiles allocated,
// confirmed or released.
func (r *providerRig) held() int {
	pool, _ := r.sim.State(r.t).Pool("esim-travel")
	return pool.Allocated + pool.Confirmed + pool.Released
}

// A crash between a downloadOrder and the record of its answer leaves the
// reservation requested, with the call's identifier: the resumed order
// sends the call again under it and gets the profile the SM-DP+ reserved,
// never a second one.
func TestAResumedOrderUsesTheProfileALostAnswerReserved(t *testing.T) {
	r := newProviderRig(t)
	o := r.order(2)
	callID := uuid.NewString()
	ctx := context.Background()
	r.locked(o.ID, func(ctx context.Context, l ordering.Locked) error {
		return r.store.Records(l).RequestReservation(ctx, o.ID, 0, "esim-travel", callID)
	})
	// The call went out and executed; then the process died.
	reserved, err := r.client.DownloadOrderAs(ctx, callID, es2plus.DownloadOrderRequest{ProfileType: "esim-travel"})
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := r.issue(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(profiles) != 2 || profiles[0].ICCID != reserved {
		t.Fatalf("profiles %+v, want the first to be %s, reserved before the crash", profiles, reserved)
	}
	if got := r.held(); got != 2 {
		t.Errorf("the SM-DP+ holds %d profiles for an order of 2", got)
	}
	if pool, _ := r.sim.State(t).Pool("esim-travel"); pool.Released != 2 {
		t.Errorf("pool %+v, want 2 released", pool)
	}
}

// An answer lost at the first downloadOrder (the SM-DP+ executed it and
// the connection closed unanswered) fails the order; the profile it
// reserved is learnt under the call's identifier and given back, so
// nothing stays reserved for a failed order.
func TestALostAnswerOfAFailedOrderIsGivenBack(t *testing.T) {
	for _, vendor := range []bool{false, true} {
		r := newProviderRig(t)
		if vendor {
			r = newProviderRig(t, smdpsim.Vendor{ProfileType: "esim-travel", PaddedICCIDs: true, ExecutedWithWarning: true, OmitSMDPAddress: true})
		}
		if err := r.sim.Control.AddFault(context.Background(), smdpsim.Fault{Function: "downloadOrder", Mode: smdpsim.ModeLose, Count: 1, SkipCount: 1}); err != nil {
			t.Fatal(err)
		}
		o := r.order(3)
		if _, err := r.issue(o); !errors.Is(err, ordering.ErrProviderFailed) {
			t.Fatalf("vendor %t: Issue = %v, want the order failed", vendor, err)
		}
		if got := r.held(); got != 0 {
			t.Errorf("vendor %t: the SM-DP+ still holds %d profiles of the failed order: %+v", vendor, got, r.sim.State(t).Profiles)
		}
		st := r.sim.State(t)
		if len(st.Profiles) != 2 {
			t.Errorf("vendor %t: %d profiles touched, want the 2 the order reserved: %+v", vendor, len(st.Profiles), st.Profiles)
		}
		for _, p := range st.Profiles {
			if p.History[len(p.History)-1] != smdpsim.EventCancelled {
				t.Errorf("vendor %t: profile %s: history %v, want it cancelled", vendor, p.ICCID, p.History)
			}
		}
		var reservations []es2plus.Reservation
		r.locked(o.ID, func(ctx context.Context, l ordering.Locked) (err error) {
			reservations, err = r.store.Records(l).Reservations(ctx, o.ID)
			return err
		})
		for _, res := range reservations {
			if res.State != es2plus.Cancelled || res.ICCID == "" {
				t.Errorf("vendor %t: reservation %+v, want cancelled with its ICCID learnt", vendor, res)
			}
		}
	}
}

// A released profile of an order whose completion found its ICCID on
// another eSIM (an SM-DP+ that issued it twice) stays that eSIM's; the
// order's other profiles are given back when it fails.
func TestAnOrderFailedAfterIssuingGivesBackAllButTheICCIDInUse(t *testing.T) {
	r := newProviderRig(t)
	o := r.order(2)
	profiles, err := r.issue(o)
	if err != nil {
		t.Fatal(err)
	}
	// Another order completed with the first profile's ICCID.
	other := r.order(1)
	now := time.Now().UTC().Truncate(time.Microsecond)
	r.locked(other.ID, func(ctx context.Context, l ordering.Locked) error {
		return l.Complete(ctx, other.ID, []ordering.Esim{{
			ID: uuid.Must(uuid.NewV7()), OrderID: other.ID, PlanName: other.PlanName, ICCID: profiles[0].ICCID,
			MatchingID: "OTHER-1", SMDPAddress: "smdp.example.com", QRToken: base64.RawURLEncoding.EncodeToString(append(uuid.New().NodeID(), make([]byte, 26)...)),
			Status: ordering.EsimAllocated, ValidityDays: 30, Data: ordering.EsimData{TotalBytes: 5 << 30, UpdatedAt: now}, CreatedAt: now,
		}}, ordering.Event{ID: "evt_" + strings.ReplaceAll(uuid.NewString(), "-", ""), Type: ordering.EventOrderCompleted, OrderID: other.ID, CreatedAt: now})
	})
	r.locked(o.ID, func(ctx context.Context, l ordering.Locked) error { return r.p.Release(ctx, l, o.ID) })
	st := r.sim.State(t)
	if p, _ := st.Profile(profiles[0].ICCID); p.State != smdpsim.StateReleased {
		t.Errorf("the profile another eSIM has is %s, want left released", p.State)
	}
	if p, _ := st.Profile(profiles[1].ICCID); p.State != smdpsim.StateAvailable {
		t.Errorf("the order's other profile is %s, want given back (Available)", p.State)
	}
	// Releasing again, as every resume of the failing order does, moves
	// nothing more.
	calls := st.Calls
	r.locked(o.ID, func(ctx context.Context, l ordering.Locked) error { return r.p.Release(ctx, l, o.ID) })
	if after := r.sim.State(t).Calls; after[es2plus.FunctionCancelOrder]["success"] != calls[es2plus.FunctionCancelOrder]["success"] {
		t.Errorf("a second release cancelled again: %v, then %v", calls, after)
	}
}

// The profiles a failing order could not give back within its budget are
// the canceller's: its job is written with the cancellations, and each
// turn of it (CancelDue, under the order's lock) is bounded by the same
// budget however long the SM-DP+ hangs, so a hanging SM-DP+ holds a
// worker no longer and other orders waiting in the queue get theirs; the
// profiles stay due until a turn gives them back.
func TestTheCancellerGivesBackWhatTheBudgetLeft(t *testing.T) {
	r := newProviderRig(t)
	const budget = 300 * time.Millisecond
	p := es2plus.NewProvider(r.client, func(tx ordering.Locked) es2plus.Store { return r.store.Records(tx) },
		es2plus.ProfileTypes{Default: "esim-travel"}, nil, es2plus.Settings{CancelBudget: budget, RetryBackoff: time.Hour})
	o := r.order(2)
	if _, err := r.issue(o); err != nil {
		t.Fatal(err)
	}
	// The order's own attempt and the canceller's first turn each meet a
	// hanging cancelOrder.
	if err := r.sim.Control.AddFault(context.Background(), smdpsim.Fault{Function: "cancelOrder", Mode: smdpsim.ModeHang, Count: 2, Hang: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	r.locked(o.ID, func(ctx context.Context, l ordering.Locked) error { return p.Release(ctx, l, o.ID) })
	if got := r.held(); got != 2 {
		t.Fatalf("the SM-DP+ holds %d profiles after the budget ran out, want both", got)
	}
	var jobsOfOrder int
	if err := r.pool.QueryRow(context.Background(), "SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'order_id' = $2",
		(jobs.CancelProfiles{}).Kind(), o.ID.String()).Scan(&jobsOfOrder); err != nil || jobsOfOrder != 1 {
		t.Fatalf("%d canceller's jobs for the order (%v), want 1", jobsOfOrder, err)
	}

	turn := func() (int, time.Duration) {
		t.Helper()
		var left int
		start := time.Now()
		r.locked(o.ID, func(ctx context.Context, l ordering.Locked) (err error) {
			left, err = p.CancelDue(ctx, l, o.ID)
			return err
		})
		return left, time.Since(start)
	}
	if left, took := turn(); left != 2 || took > budget+2*time.Second {
		t.Errorf("a turn against a hanging SM-DP+ left %d due after %s; want 2, within about the budget (%s)", left, took, budget)
	}
	if left, _ := turn(); left != 0 {
		t.Errorf("a turn with the SM-DP+ back left %d due, want 0", left)
	}
	if got := r.held(); got != 0 {
		t.Errorf("the SM-DP+ still holds %d profiles of the failed order", got)
	}
}
