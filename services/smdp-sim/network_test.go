package smdpsim_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
)

// recorder is an operator that records what it is told and refuses with
// err.
type recorder struct {
	mu  sync.Mutex
	got []smdpsim.Notification
	err error
}

func (r *recorder) Notify(_ context.Context, n smdpsim.Notification) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, n)
	return r.err
}

func (r *recorder) notifications() []smdpsim.Notification {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]smdpsim.Notification(nil), r.got...)
}

// released is a profile ordered as ordering orders it: reserved, then
// confirmed and released.
func released(t *testing.T, s *smdpsim.Sim) string {
	t.Helper()
	iccid := allocate(t, s, "travel")
	if _, err := s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: iccid, ReleaseFlag: flag(true)}); err != nil {
		t.Fatal(err)
	}
	return iccid
}

func clockSim(t *testing.T, now *time.Time) *smdpsim.Sim {
	t.Helper()
	s, err := smdpsim.New(smdpsim.Config{SMDPAddress: "smdp.example", Pools: []smdpsim.Pool{{ProfileType: "travel", Count: 5}}, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// A released profile installs and is reported as BPP download then BPP
// installation, Executed-Success, at the install time; installing again
// reports again (an SM-DP+ retrying) without changing the device.
func TestInstallNotifiesTheOperator(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s := clockSim(t, &now)
	op := &recorder{}
	s.SetNotifier(op)
	iccid := released(t, s)

	res, err := s.Install(ctx, iccid, "89049032000000000000000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if res.Device.ICCID != iccid || !res.Device.InstalledAt.Equal(now) || !res.Device.AttachedAt.IsZero() || len(res.Notifications) != 2 ||
		res.Notifications[0] != (smdpsim.NotificationResult{Point: 3, Sent: true}) || res.Notifications[1] != (smdpsim.NotificationResult{Point: 4, Sent: true}) {
		t.Fatalf("install = %+v", res)
	}
	got := op.notifications()
	if len(got) != 2 {
		t.Fatalf("told %+v", got)
	}
	for i, point := range []int{smdpsim.NotificationBPPDownload, smdpsim.NotificationBPPInstallation} {
		want := smdpsim.Notification{ICCID: iccid, EID: "89049032000000000000000000000001", ProfileType: "travel", Point: point, Status: "Executed-Success", Timestamp: now}
		if got[i] != want {
			t.Errorf("notification %d = %+v, want %+v", i, got[i], want)
		}
	}
	st := s.State()
	if p, _ := st.Profile(iccid); p.State != smdpsim.StateInstalled {
		t.Errorf("profile %+v", p)
	}
	if pool, _ := st.Pool("travel"); pool.Installed != 1 || pool.Released != 0 {
		t.Errorf("pool %+v", pool)
	}

	now = now.Add(time.Hour)
	op.err = errors.New("refused")
	again, err := s.Install(ctx, iccid, "")
	if err != nil || !again.Device.InstalledAt.Equal(res.Device.InstalledAt) || len(again.Notifications) != 2 || again.Notifications[1].Error != "refused" {
		t.Fatalf("second install = %+v, %v", again, err)
	}
	if got := op.notifications(); len(got) != 4 || !got[3].Timestamp.Equal(res.Device.InstalledAt) {
		t.Errorf("told again %+v", got)
	}
	// On a device: too late to cancel the order.
	wantCode(t, errOf(s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: iccid, FinalProfileStatusIndicator: "Available"})), "8.2.1", "3.7")
}

// Without an operator the profile installs and nothing is sent.
func TestInstallWithoutAnOperator(t *testing.T) {
	s := newSim(t)
	iccid := released(t, s)
	res, err := s.Install(ctx, iccid, "")
	if err != nil || len(res.Notifications) != 2 || res.Notifications[0].Sent || res.Notifications[1].Sent {
		t.Fatalf("install = %+v, %v", res, err)
	}
}

// What is not released does not install, attach or use data, and
// changes nothing.
func TestDeviceMisuse(t *testing.T) {
	s := newSim(t)
	op := &recorder{}
	s.SetNotifier(op)
	allocated := allocate(t, s, "travel")
	rel := released(t, s)
	before := s.State()
	for name, err := range map[string]error{
		"install unknown":   errOf(s.Install(ctx, "8988000000000000000", "")),
		"install allocated": errOf(s.Install(ctx, allocated, "")),
		"attach released":   errOf(s.Attach(rel)),
		"attach unknown":    errOf(s.Attach("8988000000000000000")),
		"use released":      errOf(s.Use(rel, 10)),
	} {
		want := smdpsim.ErrNotAllowed
		if name == "install unknown" || name == "attach unknown" {
			want = smdpsim.ErrUnknownICCID
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	if _, err := s.Install(ctx, rel, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Use(rel, 10); !errors.Is(err, smdpsim.ErrNotAllowed) {
		t.Errorf("use before attach: %v", err)
	}
	var ve *smdpsim.ValidationError
	if _, err := s.Use(rel, 0); !errors.As(err, &ve) || ve.Field != "bytes" {
		t.Errorf("use 0 bytes: %v", err)
	}
	if d, _ := s.State().Profile(rel); len(d.History) != 4 {
		t.Errorf("history %v", d.History)
	}
	if len(op.notifications()) != 2 || len(before.Devices) != 0 {
		t.Errorf("told %+v", op.notifications())
	}
}

// Attach keeps the first attach; use adds up; the usage feed reads the
// profiles the network serves (released or installed) and leaves out the
// others.
func TestAttachUseAndUsage(t *testing.T) {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	s := clockSim(t, &now)
	iccid := released(t, s)
	idle := released(t, s)
	reserved := allocate(t, s, "travel")
	if _, err := s.Install(ctx, iccid, ""); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	attached := now
	if _, err := s.Attach(iccid); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if d, err := s.Attach(iccid); err != nil || !d.AttachedAt.Equal(attached) {
		t.Fatalf("second attach = %+v, %v", d, err)
	}
	for _, n := range []int64{1000, 500} {
		if _, err := s.Use(iccid, n); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Minute)
	got, err := s.Usage([]string{iccid, idle, reserved, "8988000000000000000", iccid + "F", idle})
	if err != nil {
		t.Fatal(err)
	}
	want := []smdpsim.UsageReading{
		{ICCID: iccid, AttachedAt: attached, UsedBytes: 1500, ReadAt: now},
		{ICCID: idle, ReadAt: now},
	}
	if len(got) != len(want) {
		t.Fatalf("usage = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("reading %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	var ve *smdpsim.ValidationError
	if _, err := s.Usage(make([]string, smdpsim.MaxUsageICCIDs+1)); !errors.As(err, &ve) || ve.Field != "iccids" {
		t.Errorf("too many ICCIDs: %v", err)
	}
}

// A bundle is added once per top-up id: the same call again adds
// nothing, another bundle under the same id is a conflict, and an
// unknown ICCID is refused; none of the refusals changes anything.
func TestAddBundle(t *testing.T) {
	s := newSim(t)
	iccid := released(t, s)
	b := smdpsim.Bundle{TopUpID: "t-1", ICCID: iccid, Bytes: 1 << 30, Days: 7}
	if added, err := s.AddBundle(b); !added || err != nil {
		t.Fatalf("add = %v, %v", added, err)
	}
	if added, err := s.AddBundle(b); added || err != nil {
		t.Fatalf("again = %v, %v", added, err)
	}
	other := b
	other.Days = 8
	if _, err := s.AddBundle(other); !errors.Is(err, smdpsim.ErrBundleConflict) {
		t.Errorf("conflict: %v", err)
	}
	if _, err := s.AddBundle(smdpsim.Bundle{TopUpID: "t-2", ICCID: "8988000000000000000", Bytes: 1}); !errors.Is(err, smdpsim.ErrUnknownICCID) {
		t.Errorf("unknown ICCID: %v", err)
	}
	if _, err := s.AddBundle(smdpsim.Bundle{TopUpID: "t-3", ICCID: allocate(t, s, "travel"), Bytes: 1}); !errors.Is(err, smdpsim.ErrUnknownICCID) {
		t.Errorf("a profile not released: %v", err)
	}
	for _, bad := range []smdpsim.Bundle{{ICCID: iccid, Bytes: 1}, {TopUpID: "x", Bytes: 1}, {TopUpID: "x", ICCID: iccid, Bytes: -1}, {TopUpID: "x", ICCID: iccid}} {
		var ve *smdpsim.ValidationError
		if _, err := s.AddBundle(bad); !errors.As(err, &ve) {
			t.Errorf("%+v: %v, want a validation error", bad, err)
		}
	}
	if st := s.State(); len(st.Bundles) != 1 || st.Bundles[0] != b {
		t.Errorf("bundles %+v", st.Bundles)
	}
	s.Reset()
	if st := s.State(); len(st.Bundles) != 0 || len(st.Devices) != 0 {
		t.Errorf("after reset %+v", st)
	}
}
