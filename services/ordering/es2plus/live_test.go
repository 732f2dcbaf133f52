package es2plus_test

import (
	"context"
	"testing"
	"time"

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
}
