package smdpsim_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
)

var ctx = context.Background()

func newSim(t *testing.T, pools ...smdpsim.Pool) *smdpsim.Sim {
	t.Helper()
	if len(pools) == 0 {
		pools = []smdpsim.Pool{{ProfileType: "travel", Count: 3}, {ProfileType: "data", Count: 2}}
	}
	s, err := smdpsim.New(smdpsim.Config{SMDPAddress: "smdp.example", Pools: pools})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func wantCode(t *testing.T, err error, subject, reason string) {
	t.Helper()
	var fe *smdpsim.FunctionError
	if !errors.As(err, &fe) || fe.SubjectCode != subject || fe.ReasonCode != reason {
		t.Fatalf("got %v, want Failed %s/%s", err, subject, reason)
	}
}

func allocate(t *testing.T, s *smdpsim.Sim, profileType string) string {
	t.Helper()
	res, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ProfileType: profileType})
	if err != nil {
		t.Fatal(err)
	}
	return res.ICCID
}

// errOf is the error of a call, for wantCode.
func errOf[T any](_ T, err error) error { return err }

func flag(b bool) *bool { return &b }

func TestICCIDsAreValidAndUnique(t *testing.T) {
	s := newSim(t, smdpsim.Pool{ProfileType: "a", Count: 500}, smdpsim.Pool{ProfileType: "b", Count: 500})
	seen := map[string]bool{}
	for _, typ := range []string{"a", "b"} {
		for range 500 {
			iccid := allocate(t, s, typ)
			if !smdpsim.ValidICCID(iccid) || seen[iccid] {
				t.Fatalf("ICCID %s invalid or repeated", iccid)
			}
			seen[iccid] = true
		}
	}
	if smdpsim.ValidICCID("8988000000000000001") && smdpsim.ValidICCID("8988000000000000002") {
		t.Fatal("Luhn accepts two check digits")
	}
}

func TestLifecycle(t *testing.T) {
	s := newSim(t)
	iccid := allocate(t, s, "travel")
	res, err := s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: iccid, EID: "89049032000000000000000000000001", ReleaseFlag: flag(true)})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[A-Z0-9]{5}(-[A-Z0-9]{5}){4}$`).MatchString(res.MatchingID) || res.SMDPAddress != "smdp.example" || res.EID == "" {
		t.Fatalf("confirm answered %+v", res)
	}
	// No double release.
	_, err = s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: iccid, ReleaseFlag: flag(true)})
	wantCode(t, err, "8.2.1", "3.7")
	if _, err := s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: iccid, FinalProfileStatusIndicator: "Available"}); err != nil {
		t.Fatal(err)
	}
	st := s.State()
	p, _ := st.Profile(iccid)
	if p.State != smdpsim.StateAvailable || len(p.History) != 3 || p.History[1] != "released" || p.History[2] != "cancelled" {
		t.Fatalf("profile %+v", p)
	}
	pool, _ := st.Pool("travel")
	if pool.Available != 3 || pool.Cancelled != 1 {
		t.Fatalf("pool %+v", pool)
	}
	if st.Calls["downloadOrder"]["success"] != 1 || st.Calls["confirmOrder"]["failed"] != 1 {
		t.Fatalf("calls %+v", st.Calls)
	}

	// Confirm without release, then cancel for good.
	other := allocate(t, s, "travel")
	if _, err := s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: other, MatchingID: "MINE", ReleaseFlag: flag(false)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: other, FinalProfileStatusIndicator: "Unavailable"}); err != nil {
		t.Fatal(err)
	}
	// Cancelled: no confirm, no second cancel.
	_, err = s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: other, ReleaseFlag: flag(true)})
	wantCode(t, err, "8.2.1", "3.7")
	wantCode(t, errOf(s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: other, FinalProfileStatusIndicator: "Available"})), "8.2.1", "3.7")
	if p, _ := s.State().Profile(other); p.State != smdpsim.StateUnavailable || p.MatchingID != "MINE" {
		t.Fatalf("profile %+v", p)
	}
}

func TestMisuse(t *testing.T) {
	s := newSim(t)
	unknown := "8999000000000000000"
	for !smdpsim.ValidICCID(unknown) {
		unknown = unknown[:18] + string(unknown[18]+1)
	}
	_, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ProfileType: "nope"})
	wantCode(t, err, "8.2.5", "3.9")
	_, err = s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{})
	wantCode(t, err, "1.2", "2.2")
	_, err = s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ICCID: unknown})
	wantCode(t, err, "8.2.1", "3.9")
	a := allocate(t, s, "data")
	_, err = s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ICCID: a})
	wantCode(t, err, "8.2.1", "3.7")
	allocate(t, s, "data")
	_, err = s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ProfileType: "data"})
	wantCode(t, err, "8.2.5", "3.7")

	_, err = s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{})
	wantCode(t, err, "1.2", "2.2")
	_, err = s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: unknown, ReleaseFlag: flag(true)})
	wantCode(t, err, "8.2.1", "3.9")
	if _, err := s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: a, MatchingID: "TAKEN", ReleaseFlag: flag(true)}); err != nil {
		t.Fatal(err)
	}
	b := allocate(t, s, "travel")
	_, err = s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: b, MatchingID: "TAKEN", ReleaseFlag: flag(true)})
	wantCode(t, err, "8.2.6", "3.3")
	free := allocate(t, s, "travel")
	wantCode(t, errOf(s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: free, FinalProfileStatusIndicator: "Gone"})), "1.2", "2.1")
	wantCode(t, errOf(s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: free})), "1.2", "2.2")
	wantCode(t, errOf(s.CancelOrder(ctx, smdpsim.CancelOrderRequest{FinalProfileStatusIndicator: "Available"})), "1.2", "2.2")
	wantCode(t, errOf(s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: unknown, FinalProfileStatusIndicator: "Available"})), "8.2.1", "3.9")
	last := allocate(t, s, "travel")
	if _, err := s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: last, FinalProfileStatusIndicator: "Available"}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, errOf(s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: last, FinalProfileStatusIndicator: "Available"})), "8.2.1", "3.7")
	// The matchingId of a cancelled order is free again.
	if _, err := s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: a, FinalProfileStatusIndicator: "Available"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: b, MatchingID: "TAKEN", ReleaseFlag: flag(true)}); err != nil {
		t.Fatal(err)
	}
	// A given ICCID that is Available is allocated.
	if got, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ICCID: a, ProfileType: "data"}); err != nil || got.ICCID != a {
		t.Fatalf("downloadOrder by iccid: %s, %v", got.ICCID, err)
	}
}

func TestFaults(t *testing.T) {
	s := newSim(t, smdpsim.Pool{ProfileType: "travel", Count: 10}, smdpsim.Pool{ProfileType: "data", Count: 10})
	if _, err := s.AddFault(smdpsim.Fault{Function: "downloadOrder", ProfileType: "travel", Mode: "fail", Count: 2, SkipCount: 1}); err != nil {
		t.Fatal(err)
	}
	allocate(t, s, "travel") // skipped
	allocate(t, s, "data")   // another type
	for range 2 {
		_, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ProfileType: "travel"})
		wantCode(t, err, smdpsim.DefaultFaultSubject, smdpsim.DefaultFaultReason)
	}
	allocate(t, s, "travel") // spent
	st := s.State()
	if p, _ := st.Pool("travel"); p.Allocated != 2 || len(st.Faults) != 0 || st.Calls["downloadOrder"]["fault-fail"] != 2 {
		t.Fatalf("pool %+v faults %+v calls %+v", p, st.Faults, st.Calls)
	}

	// confirmOrder faults match the iccid's type, and change nothing.
	data := allocate(t, s, "data")
	f, err := s.AddFault(smdpsim.Fault{Function: "confirmOrder", ProfileType: "data", Mode: "garbage"})
	if err != nil || f.ID == "" {
		t.Fatal(f, err)
	}
	if _, err := s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: data, ReleaseFlag: flag(true)}); !errors.Is(err, smdpsim.ErrGarbage) {
		t.Fatalf("confirm: %v", err)
	}
	if p, _ := s.State().Profile(data); p.State != smdpsim.StateAllocated {
		t.Fatalf("a faulted call changed the profile: %+v", p)
	}
	s.ClearFaults()

	if _, err := s.AddFault(smdpsim.Fault{Function: "cancelOrder", Mode: "hang", Hang: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: data, FinalProfileStatusIndicator: "Available"}); !errors.Is(err, smdpsim.ErrHang) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("hang: %v after %s", err, time.Since(start))
	}
	// A hang ends when the caller gives up.
	s.ClearFaults()
	if _, err := s.AddFault(smdpsim.Fault{Function: "cancelOrder", Mode: "hang"}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := s.CancelOrder(short, smdpsim.CancelOrderRequest{ICCID: data, FinalProfileStatusIndicator: "Available"}); !errors.Is(err, smdpsim.ErrHang) {
		t.Fatal(err)
	}

	for field, bad := range map[string]smdpsim.Fault{
		"function":    {Function: "getProfileStatus", Mode: "fail"},
		"mode":        {Function: "cancelOrder", Mode: "explode"},
		"profileType": {Function: "cancelOrder", Mode: "fail", ProfileType: "nope"},
		"count":       {Function: "cancelOrder", Mode: "fail", Count: -1},
		"skip":        {Function: "cancelOrder", Mode: "fail", SkipCount: -1},
		"subjectCode": {Function: "cancelOrder", Mode: "fail", SubjectCode: "x"},
		"hang":        {Function: "cancelOrder", Mode: "fail", Hang: time.Second},
	} {
		var ve *smdpsim.ValidationError
		if _, err := s.AddFault(bad); !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("AddFault(%+v) = %v, want a ValidationError on %s", bad, err, field)
		}
	}
}

func TestDrainAndReset(t *testing.T) {
	s := newSim(t)
	kept := allocate(t, s, "travel")
	back := allocate(t, s, "travel")
	if _, err := s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: back, FinalProfileStatusIndicator: "Available"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Drain("travel"); err != nil {
		t.Fatal(err)
	}
	_, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ProfileType: "travel"})
	wantCode(t, err, "8.2.5", "3.7")
	if p, _ := s.State().Pool("travel"); p.Available != 0 || p.Allocated != 1 || p.Unavailable != 2 {
		t.Fatalf("pool %+v", p)
	}
	allocate(t, s, "data") // other pools untouched
	if err := s.Drain("nope"); !errors.Is(err, smdpsim.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := s.AddFault(smdpsim.Fault{Function: "downloadOrder", Mode: "fail"}); err != nil {
		t.Fatal(err)
	}

	s.Reset()
	st := s.State()
	if p, _ := st.Pool("travel"); p.Available != 3 || len(st.Profiles) != 0 || len(st.Faults) != 0 || len(st.Calls) != 0 {
		t.Fatalf("after reset: %+v", st)
	}
	// A full pool again, in a new block of ICCIDs.
	if got := allocate(t, s, "travel"); got == kept {
		t.Fatalf("after reset the pool issued %s again", got)
	}
}

func TestParsePools(t *testing.T) {
	if p, err := smdpsim.ParsePools("esim-travel:10000, data_1.x:1"); err != nil || len(p) != 2 || p[1].Count != 1 {
		t.Fatal(p, err)
	}
	for _, bad := range []string{"", "a", "a:0", "a:1000001", "a:1,a:2", "bad name:1", "a:x"} {
		if _, err := smdpsim.ParsePools(bad); err == nil {
			t.Errorf("ParsePools(%q) accepted", bad)
		}
	}
}

// A restarted or reset simulator issues other ICCIDs than before: the
// platform's database keeps the earlier ones.
func TestRestartIssuesNewICCIDs(t *testing.T) {
	cfg := smdpsim.Config{SMDPAddress: "smdp.example.invalid", Pools: []smdpsim.Pool{{ProfileType: "t", Count: 3}}}
	seen := map[string]bool{}
	for range 5 {
		s, err := smdpsim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			res, err := s.DownloadOrder(context.Background(), smdpsim.DownloadOrderRequest{ProfileType: "t"})
			iccid := res.ICCID
			if err != nil || !smdpsim.ValidICCID(iccid) {
				t.Fatalf("downloadOrder = %q, %v", iccid, err)
			}
			if seen[iccid] {
				t.Fatalf("ICCID %s issued again after a restart", iccid)
			}
			seen[iccid] = true
			s.Reset()
		}
		s.Close()
	}
}

// Calls are remembered by header, the last MaxRemembered of them: the
// oldest is forgotten first, and a call sent again after it was forgotten
// executes again.
func TestRememberedCallsAreBounded(t *testing.T) {
	s := newSim(t, smdpsim.Pool{ProfileType: "travel", Count: 10})
	h := func(i int) smdpsim.Header {
		return smdpsim.Header{FunctionRequesterIdentifier: "r", FunctionCallIdentifier: "call-" + strconv.Itoa(i)}
	}
	first, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{Header: h(0), ProfileType: "travel"})
	if err != nil {
		t.Fatal(err)
	}
	// MaxRemembered-1 more, refusals (remembered too) that reserve nothing.
	for i := 1; i < smdpsim.MaxRemembered; i++ {
		if _, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{Header: h(i), ProfileType: "nope"}); err == nil {
			t.Fatal("an unknown type allocated")
		}
	}
	if again, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{Header: h(0), ProfileType: "travel"}); err != nil || again.ICCID != first.ICCID {
		t.Fatalf("the first call, still remembered: %+v %v, want %s", again, err, first.ICCID)
	}
	// One more pushes the first out.
	_, _ = s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{Header: h(smdpsim.MaxRemembered), ProfileType: "nope"})
	if again, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{Header: h(0), ProfileType: "travel"}); err != nil || again.ICCID == first.ICCID {
		t.Fatalf("the first call, forgotten: %+v %v, want another profile", again, err)
	}
	// That pushed the second out; the third is still remembered, as its
	// refusal.
	_, err = s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{Header: h(2), ProfileType: "nope"})
	wantCode(t, err, "8.2.5", "3.9")
	st := s.State()
	if p, _ := st.Pool("travel"); p.Allocated != 2 || st.Calls["downloadOrder"]["replayed"] != 2 {
		t.Fatalf("pool %+v calls %v", p, st.Calls)
	}
}

// A lose fault executes the function and answers ErrLost; the call sent
// again under its header gets the result.
func TestLoseFaultExecutes(t *testing.T) {
	s := newSim(t)
	if _, err := s.AddFault(smdpsim.Fault{Function: "downloadOrder", ProfileType: "travel", Mode: "lose", Count: 1}); err != nil {
		t.Fatal(err)
	}
	req := smdpsim.DownloadOrderRequest{Header: smdpsim.Header{FunctionRequesterIdentifier: "r", FunctionCallIdentifier: "c"}, ProfileType: "travel"}
	if res, err := s.DownloadOrder(ctx, req); !errors.Is(err, smdpsim.ErrLost) || res.ICCID != "" {
		t.Fatalf("lost downloadOrder: %+v %v", res, err)
	}
	st := s.State()
	if p, _ := st.Pool("travel"); p.Allocated != 1 || st.Calls["downloadOrder"]["fault-lose"] != 1 || len(st.Faults) != 0 {
		t.Fatalf("pool %+v calls %v", p, st.Calls)
	}
	res, err := s.DownloadOrder(ctx, req)
	if err != nil || res.ICCID != st.Profiles[0].ICCID {
		t.Fatalf("sent again: %+v %v, want %s", res, err, st.Profiles[0].ICCID)
	}
	if smdpsim.Outcome(smdpsim.ErrLost) != smdpsim.OutcomeFaultLose {
		t.Error(smdpsim.Outcome(smdpsim.ErrLost))
	}
	// lose takes no codes, message or hang.
	for field, bad := range map[string]smdpsim.Fault{
		"reasonCode": {Function: "cancelOrder", Mode: "lose", ReasonCode: "3.7"},
		"message":    {Function: "cancelOrder", Mode: "lose", Message: "x"},
		"hang":       {Function: "cancelOrder", Mode: "lose", Hang: time.Second},
	} {
		var ve *smdpsim.ValidationError
		if _, err := s.AddFault(bad); !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("AddFault(%+v) = %v, want a ValidationError on %s", bad, err, field)
		}
	}
}

func TestSetVendor(t *testing.T) {
	s := newSim(t)
	var ve *smdpsim.ValidationError
	for _, bad := range []smdpsim.Vendor{{PaddedICCIDs: true}, {ProfileType: "nope", PaddedICCIDs: true}} {
		if err := s.SetVendor(bad); !errors.As(err, &ve) || ve.Field != "profileType" {
			t.Errorf("SetVendor(%+v) = %v, want a ValidationError on profileType", bad, err)
		}
	}
	if err := s.SetVendor(smdpsim.Vendor{ProfileType: "travel", PaddedICCIDs: true, ExecutedWithWarning: true}); err != nil {
		t.Fatal(err)
	}
	res, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ProfileType: "travel"})
	if err != nil || len(res.ICCID) != 20 || res.Warning == nil || res.Warning.SubjectIdentifier != "travel" {
		t.Fatalf("downloadOrder: %+v %v", res, err)
	}
	if res, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ProfileType: "data"}); err != nil || len(res.ICCID) != 19 || res.Warning != nil {
		t.Fatalf("another type's downloadOrder: %+v %v", res, err)
	}
	// Every setting off removes it.
	if err := s.SetVendor(smdpsim.Vendor{ProfileType: "travel"}); err != nil {
		t.Fatal(err)
	}
	if vs := s.State().Vendors; len(vs) != 0 {
		t.Fatalf("vendors %+v", vs)
	}
}

// The association checks of the domain: confirmOrder binds an EID given
// to a profile bound to none and refuses another; a refused call changes
// nothing.
func TestAssociation(t *testing.T) {
	s := newSim(t)
	const eid, other = "89049032000000000000000000000001", "89049032000000000000000000000002"
	iccid := allocate(t, s, "travel")
	if _, err := s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: iccid, EID: eid, MatchingID: "M-1", ReleaseFlag: flag(false)}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, errOf(s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: iccid, EID: other, FinalProfileStatusIndicator: "Available"})), "8.1.1", "3.10")
	wantCode(t, errOf(s.CancelOrder(ctx, smdpsim.CancelOrderRequest{ICCID: iccid, MatchingID: "M-2", FinalProfileStatusIndicator: "Available"})), "8.2.6", "3.10")
	if p, _ := s.State().Profile(iccid); p.State != smdpsim.StateConfirmed || p.EID != eid || p.MatchingID != "M-1" {
		t.Fatalf("profile %+v", p)
	}
	bound, err := s.DownloadOrder(ctx, smdpsim.DownloadOrderRequest{ProfileType: "travel", EID: eid})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: bound.ICCID, EID: other, ReleaseFlag: flag(true)})
	wantCode(t, err, "8.1.1", "3.10")
	// Without an EID, confirmOrder keeps the bound one.
	if res, err := s.ConfirmOrder(ctx, smdpsim.ConfirmOrderRequest{ICCID: bound.ICCID, ReleaseFlag: flag(true)}); err != nil || res.EID != eid {
		t.Fatalf("confirmOrder: %+v %v", res, err)
	}
}
