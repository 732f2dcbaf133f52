package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

// The pool every plan's live eSIMs come from in these tests.
const (
	profileType = "esim-travel"
	poolSize    = 200
)

// startLive is a platform whose live orders go to an SM-DP+ simulator over
// ES2+ with mutual TLS, each call timing out after 400 ms.
func startLive(t *testing.T) (*platform, *smdpsimtest.Sim) {
	t.Helper()
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: fmt.Sprintf("%s:%d", profileType, poolSize)})
	return start(t, options{smdp: sim, smdpTimeout: 400 * time.Millisecond}), sim
}

// TestLiveOrderOverES2Plus: a live order of three eSIMs reserves and
// releases three profiles at the SM-DP+, and each eSIM carries the address
// and the matching id the SM-DP+ answered; a sandbox order beside it does
// not reach the SM-DP+.
func TestLiveOrderOverES2Plus(t *testing.T) {
	p, sim := startLive(t)
	pt := p.partner("USD", live, 200_00)
	fixed, price, validity := p.planOf(pt.key, "fixed")

	r := pt.order("live-3", orderBody(fixed, `"quantity":3`))
	if r.status != http.StatusCreated {
		t.Fatalf("live order: %d %s", r.status, r.body)
	}
	var created struct{ Data orderJSON }
	r.json(t, &created)
	o := created.Data
	if o.Status != "completed" || o.Environment != "live" || len(o.Esims) != 3 {
		t.Fatalf("live order %+v", o)
	}
	st := sim.State(t)
	for _, e := range o.Esims {
		checkEsim(t, p, e, o.ID, *validity)
		prof, ok := st.Profile(e.ICCID)
		if !ok || prof.State != smdpsim.StateReleased || prof.ProfileType != profileType {
			t.Errorf("eSIM %s: the SM-DP+ has its profile as %+v (found %v), want released", e.ICCID, prof, ok)
			continue
		}
		if e.SMDPAddress != sim.SMDPAddress || e.ActivationCode != "LPA:1$"+sim.SMDPAddress+"$"+prof.MatchingID {
			t.Errorf("eSIM %s: SM-DP+ %q, activation code %q; want %s and the matching id %s it issued",
				e.ICCID, e.SMDPAddress, e.ActivationCode, sim.SMDPAddress, prof.MatchingID)
		}
	}
	if pool, _ := st.Pool(profileType); pool.Released != 3 || pool.Allocated != 0 || pool.Available != poolSize-3 {
		t.Errorf("pool %+v, want 3 released, none left reserved", pool)
	}
	if got, want := pt.balance(), int64(200_00)-3*price; got != want {
		t.Errorf("live balance %d, want %d", got, want)
	}

	// The replay answers the same eSIMs and reaches no SM-DP+.
	calls := st.Calls
	replay := pt.order("live-3", orderBody(fixed, `"quantity":3`))
	var again struct{ Data orderJSON }
	replay.json(t, &again)
	if replay.status != http.StatusOK || replay.header.Get("Idempotent-Replay") != "true" || !equalJSON(t, again.Data, o) {
		t.Errorf("replay: %d %s", replay.status, replay.body)
	}

	sb := p.partner("USD", sandbox, 100_00)
	if r := sb.order("sandbox-beside", orderBody(fixed, "")); r.status != http.StatusCreated {
		t.Fatalf("sandbox order: %d %s", r.status, r.body)
	} else {
		var s struct{ Data orderJSON }
		r.json(t, &s)
		if s.Data.Esims[0].SMDPAddress == sim.SMDPAddress {
			t.Errorf("a sandbox eSIM points at the live SM-DP+")
		}
	}
	if after := sim.State(t).Calls; !equalJSON(t, after, calls) {
		t.Errorf("the SM-DP+ was called by a replay or a sandbox order: %v, then %v", calls, after)
	}
	pt.checkMoney()
	sb.checkMoney()
}

// TestLiveProviderFaultsNeverCostThePartner makes each ES2+ function fail,
// hang past the client's timeout, answer garbage and execute but lose its
// answer, on the first and on
// a later eSIM of an order of three: each order answers 502
// provider_error, its balance is back where it was, the replay answers the
// same 502, and every profile it had reserved is given back.
func TestLiveProviderFaultsNeverCostThePartner(t *testing.T) {
	p, sim := startLive(t)
	fixed, price, _ := p.planOf(p.partner("USD", sandbox, 0).key, "fixed")
	ctx := context.Background()

	type fault struct{ function, mode, at string }
	var faults []fault
	for _, fn := range []string{"downloadOrder", "confirmOrder", "cancelOrder"} {
		for _, mode := range []string{smdpsim.ModeFail, smdpsim.ModeHang, smdpsim.ModeGarbage, smdpsim.ModeLose} {
			for _, at := range []string{"first", "later"} {
				faults = append(faults, fault{fn, mode, at})
			}
		}
	}
	for _, f := range faults {
		t.Run(f.function+"/"+f.mode+"/"+f.at, func(t *testing.T) {
			if err := sim.Control.Reset(ctx); err != nil {
				t.Fatal(err)
			}
			skip := 0
			if f.at == "later" {
				skip = 1
			}
			injected := smdpsim.Fault{Function: f.function, Mode: f.mode, Count: 1, SkipCount: skip}
			switch f.mode {
			case smdpsim.ModeFail:
				injected.SubjectCode, injected.ReasonCode = "8.2.5", "3.7"
			case smdpsim.ModeHang:
				injected.Hang = 5 * time.Second // past the 400 ms timeout
			}
			if err := sim.Control.AddFault(ctx, injected); err != nil {
				t.Fatal(err)
			}
			if f.function == "cancelOrder" {
				// cancelOrder runs only for an order that failed: make
				// the third eSIM's confirmation fail, after two were
				// reserved and released.
				if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "confirmOrder", Mode: smdpsim.ModeFail, Count: 1, SkipCount: 2}); err != nil {
					t.Fatal(err)
				}
			}
			pt := p.partner("USD", live, 3*price)
			body := orderBody(fixed, `"quantity":3`)
			first := pt.order("faulty", body)
			e := p.expectError(first, http.StatusBadGateway, "provider_error")
			if got := pt.balance(); got != 3*price {
				t.Errorf("balance %d after a provider failure, want %d (refunded in full)", got, 3*price)
			}
			replay := pt.order("faulty", body)
			if re := p.expectError(replay, http.StatusBadGateway, "provider_error"); replay.header.Get("Idempotent-Replay") != "true" || re.Error.Message != e.Error.Message {
				t.Errorf("replay: header %q, message %q; want true and %q", replay.header.Get("Idempotent-Replay"), re.Error.Message, e.Error.Message)
			}
			checkNoDetail(t, e.Error.Message, sim)
			failed := pt.orders("status=failed")
			if len(failed.Data) != 1 || failed.Data[0].Error == nil {
				t.Fatalf("failed orders %+v", failed.Data)
			}
			checkNoDetail(t, failed.Data[0].Error.Message, sim)

			// Every profile the order reserved is given back: at once,
			// or by the canceller when a cancellation did not go
			// through.
			st := waitForPool(t, sim, func(pool smdpsim.PoolState) bool {
				return pool.Allocated == 0 && pool.Confirmed == 0 && pool.Released == 0 && pool.Available == poolSize
			})
			for _, prof := range st.Profiles {
				if !slices.Contains(prof.History, "allocated") || prof.History[len(prof.History)-1] != "cancelled" {
					t.Errorf("profile %s: history %v, want reserved and then cancelled", prof.ICCID, prof.History)
				}
			}
			// A refused first reservation held nothing; one whose answer
			// was lost is sent again under its call's identifier to learn
			// what it reserved, which the loop above saw given back.
			if f.function == "downloadOrder" && f.at == "first" && f.mode == smdpsim.ModeFail && len(st.Profiles) != 0 {
				t.Errorf("profiles touched though the first reservation was refused: %+v", st.Profiles)
			}
			pt.checkMoney()
		})
	}
}

// TestLiveEmptyPool: with no profile left of the plan's type, a live order
// answers 502, is refunded, and tells the partner nothing of the SM-DP+.
func TestLiveEmptyPool(t *testing.T) {
	p, sim := startLive(t)
	if err := sim.Control.Drain(context.Background(), profileType); err != nil {
		t.Fatal(err)
	}
	pt := p.partner("USD", live, 100_00)
	fixed, _, _ := p.planOf(pt.key, "fixed")
	e := p.expectError(pt.order("empty", orderBody(fixed, `"quantity":2`)), http.StatusBadGateway, "provider_error")
	checkNoDetail(t, e.Error.Message, sim)
	o := pt.orders("status=failed").Data
	if len(o) != 1 || o[0].Error == nil {
		t.Fatalf("failed orders %+v", o)
	}
	checkNoDetail(t, o[0].Error.Message, sim)
	if pt.balance() != 100_00 {
		t.Errorf("balance %d, want 10000", pt.balance())
	}
	if got := sim.State(t).Calls["downloadOrder"]["failed"]; got != 1 {
		t.Errorf("%d refused downloadOrders, want 1", got)
	}
	pt.checkMoney()
}

// checkNoDetail fails if a message to a partner names anything of the
// SM-DP+: its status codes, its address, the protocol or a profile type.
func checkNoDetail(t *testing.T, message string, sim *smdpsimtest.Sim) {
	t.Helper()
	for _, secret := range []string{"8.2", "3.7", "es2plus", "ES2+", "downloadOrder", "confirmOrder", "cancelOrder", profileType, sim.SMDPAddress, strings.TrimPrefix(sim.ES2PlusURL, "https://"), "timeout", "Failed"} {
		if strings.Contains(message, secret) {
			t.Errorf("the partner's message %q names %q", message, secret)
		}
	}
}

// waitForPool polls the simulator until its pool satisfies ok.
func waitForPool(t *testing.T, sim *smdpsimtest.Sim, ok func(smdpsim.PoolState) bool) smdpsim.State {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := sim.State(t)
		pool, _ := st.Pool(profileType)
		if ok(pool) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 15 s the pool is %+v; profiles %+v", pool, st.Profiles)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
