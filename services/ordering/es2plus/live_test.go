package es2plus_test

import (
	"context"
	"testing"
	"time"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/ordering"
)

// A live eSIM's whole way through the simulator: ordered over ES2+,
// installed on a device (INSTALLED by the SM-DP+'s notification), then
// attached and used on the network, whose usage feed ReadUsage reads:
// ACTIVE from the first attach, with the bytes the network counted.
func TestLiveEsimThroughTheSimulator(t *testing.T) {
	r := newLiveRig(t)
	ctx := context.Background()
	e := r.order(ordering.Live)
	if p, ok := r.sim.State(t).Profile(e.ICCID); !ok || p.State != "Released" {
		t.Fatalf("the simulator has %+v", p)
	}

	res, err := r.sim.Control.Install(ctx, e.ICCID, "")
	if err != nil || res.Notifications[1].Error != "" {
		t.Fatalf("install = %+v, %v", res, err)
	}
	if got := r.esim(e); got.Status != ordering.EsimInstalled {
		t.Fatalf("after the install the eSIM is %s", got.Status)
	}

	dev, err := r.sim.Control.Attach(ctx, e.ICCID)
	if err != nil {
		t.Fatal(err)
	}
	const used = 3 << 30 // 60 percent of 5 GB
	if _, err := r.sim.Control.Use(ctx, e.ICCID, used); err != nil {
		t.Fatal(err)
	}
	n, err := r.svc.ReadUsage(ctx)
	if err != nil || n != 1 {
		t.Fatalf("ReadUsage = %d, %v; want 1 eSIM changed", n, err)
	}
	got := r.esim(e)
	if got.Status != ordering.EsimActive || got.ActivatedAt.Sub(dev.AttachedAt).Abs() > time.Microsecond ||
		got.Data.UsedBytes != used || got.Data.UpdatedAt.IsZero() ||
		!got.ExpiresAt.Equal(got.ActivatedAt.Add(time.Duration(got.ValidityDays)*24*time.Hour)) {
		t.Fatalf("after the usage read: %s activated %v (attached %v), used %d at %v, expires %v",
			got.Status, got.ActivatedAt, dev.AttachedAt, got.Data.UsedBytes, got.Data.UpdatedAt, got.ExpiresAt)
	}

	// Read again with nothing new: nothing changes.
	if n, err := r.svc.ReadUsage(ctx); err != nil || n != 0 {
		t.Errorf("a second ReadUsage = %d, %v; want 0", n, err)
	}
	if again := r.esim(e); again.Data.UsedBytes != used || !again.ActivatedAt.Equal(got.ActivatedAt) {
		t.Errorf("a second read changed the eSIM: %+v", again.Data)
	}

	// A live top-up is a bundle on the network, added once, then the
	// eSIM's.
	created, err := r.svc.CreateTopUp(ctx, ordering.NewTopUp{Scope: e.Scope, Currency: ordering.USD, EsimID: e.ID, PlanID: japan5GB})
	if err != nil || created.TopUp.Status != ordering.StatusCompleted {
		t.Fatalf("top-up = %+v, %v", created.TopUp, err)
	}
	if b := r.sim.State(t).Bundles; len(b) != 1 || b[0].TopUpID != created.TopUp.ID.String() || b[0].ICCID != e.ICCID ||
		b[0].Bytes != created.TopUp.Bytes || b[0].Days != created.TopUp.Days || b[0].Bytes == 0 {
		t.Errorf("the network's bundles %+v, want the top-up %+v", b, created.TopUp)
	}
	if topped := r.esim(e); topped.Data.TotalBytes != got.Data.TotalBytes+created.TopUp.Bytes || topped.Status != ordering.EsimActive {
		t.Errorf("after the top-up: %s with %d bytes", topped.Status, topped.Data.TotalBytes)
	}
}

// A live top-up the network refuses for good (it no longer knows the
// profile: here, a simulator reset) fails and is refunded; the eSIM
// keeps what it had.
func TestLiveTopUpTheNetworkRefuses(t *testing.T) {
	r := newLiveRig(t)
	ctx := context.Background()
	e := r.order(ordering.Live)
	if err := r.sim.Control.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	created, err := r.svc.CreateTopUp(ctx, ordering.NewTopUp{Scope: e.Scope, Currency: ordering.USD, EsimID: e.ID, PlanID: japan5GB})
	if err != nil || created.TopUp.Status != ordering.StatusFailed || created.TopUp.Error == nil {
		t.Fatalf("top-up = %+v, %v; want it failed", created.TopUp, err)
	}
	if got := r.esim(e); got.Data.TotalBytes != e.Data.TotalBytes {
		t.Errorf("a refused top-up changed the eSIM's bytes: %d, was %d", got.Data.TotalBytes, e.Data.TotalBytes)
	}
	ledger := r.deps.Ledger(t, r.account.String(), accountsv1.Environment_ENVIRONMENT_LIVE, "USD")
	if ledger.DebitsOf[created.TopUp.ID.String()] != 1 || ledger.RefundsOf[created.TopUp.ID.String()] != 1 {
		t.Errorf("the refused top-up's ledger: %d debits, %d refunds; want 1 and 1", ledger.DebitsOf[created.TopUp.ID.String()], ledger.RefundsOf[created.TopUp.ID.String()])
	}
}
