package ordering

import (
	"errors"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func activeEsim(total int64) Esim {
	e := Esim{Status: EsimAllocated, ValidityDays: 7, Data: EsimData{Unlimited: total == 0, TotalBytes: total}}
	if _, err := e.Installed(t0); err != nil {
		panic(err)
	}
	if _, err := e.Activated(t0); err != nil {
		panic(err)
	}
	return e
}

// thresholds are the esim.usage thresholds of a change.
func thresholds(c EsimChange) []int32 {
	var out []int32
	for _, e := range c.Events {
		if e.Type == EventEsimUsage {
			out = append(out, e.Threshold)
		}
	}
	return out
}

func TestUsageThresholdsAreToldOnceEach(t *testing.T) {
	e := activeEsim(1000)
	for _, step := range []struct {
		consume int64
		want    []int32
		status  string
	}{
		{499, nil, EsimActive},
		{1, []int32{50}, EsimActive},
		{100, nil, EsimActive},
		{450, []int32{80, 100}, EsimDepleted},
	} {
		c, err := e.Consume(step.consume, t0)
		if err != nil || !slices.Equal(thresholds(c), step.want) || e.Status != step.status {
			t.Errorf("consume %d: thresholds %v, %s, %v; want %v, %s", step.consume, thresholds(c), e.Status, err, step.want, step.status)
		}
	}
	if e.Data.UsedBytes != 1000 {
		t.Errorf("used %d of 1000 after consuming 1050", e.Data.UsedBytes)
	}
	if _, err := e.Consume(1, t0); err == nil {
		t.Error("a DEPLETED eSIM consumed data")
	}
	// A top-up re-arms the thresholds above the use it leaves.
	if err := e.ApplyTopUp(1000, 7, t0); err != nil || e.Status != EsimActive || e.UsageNotified != 50 {
		t.Fatalf("after a top-up to 2000: %s, marked %d, %v", e.Status, e.UsageNotified, err)
	}
	c, _ := e.Consume(600, t0)
	if got := thresholds(c); !slices.Equal(got, []int32{80}) {
		t.Errorf("thresholds after the top-up: %v, want [80]", got)
	}
}

func TestUnlimitedEsimsNeverDeplete(t *testing.T) {
	e := activeEsim(0)
	c, err := e.Consume(1<<40, t0)
	if err != nil || len(c.Events) != 0 || e.Status != EsimActive || e.Data.UsedBytes != 1<<40 {
		t.Errorf("unlimited eSIM after 1 TiB: %s, %v, %v", e.Status, c.Events, err)
	}
}

func TestStatusesMoveOnlyForward(t *testing.T) {
	e := Esim{Status: EsimAllocated, ValidityDays: 7}
	if _, err := e.Activated(t0); err == nil {
		t.Error("activated before installation")
	}
	if _, err := e.Consume(1, t0); err == nil {
		t.Error("consumed before activation")
	}
	e = activeEsim(100)
	if _, err := e.Installed(t0); err == nil {
		t.Error("installed again")
	}
	if !e.ExpiresAt.Equal(t0.Add(7 * 24 * time.Hour)) {
		t.Errorf("expires %s, want 7 days after activation", e.ExpiresAt)
	}
	if _, err := e.Expired(t0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Expired(t0); err == nil {
		t.Error("expired twice")
	}
	if err := e.ApplyTopUp(1, 1, t0); !errors.Is(err, ErrEsimExpired) {
		t.Errorf("top-up of an expired eSIM = %v", err)
	}
}

func TestReadingsMoveForwardOnly(t *testing.T) {
	e := activeEsim(100)
	if c := e.ReadUsage(10, t0.Add(time.Hour)); !c.Changed || e.Data.UsedBytes != 10 {
		t.Fatalf("first reading: %+v, used %d", c, e.Data.UsedBytes)
	}
	for _, r := range []struct {
		used int64
		at   time.Time
	}{{5, t0.Add(2 * time.Hour)}, {20, t0.Add(time.Hour)}, {10, t0.Add(3 * time.Hour)}} {
		if c := e.ReadUsage(r.used, r.at); c.Changed {
			t.Errorf("reading %d at %s changed the eSIM", r.used, r.at)
		}
	}
}

func TestCompatibleTopUp(t *testing.T) {
	e := Esim{Countries: []string{"FR", "JP"}}
	for _, tc := range []struct {
		plan Plan
		ok   bool
	}{
		{Plan{Type: PlanFixed, Countries: []string{"DE", "FR", "JP"}}, true},
		{Plan{Type: PlanFixed, Countries: []string{"JP"}}, false},
		{Plan{Type: PlanPerDay, Countries: []string{"FR", "JP"}}, false},
	} {
		err := CompatibleTopUp(e, tc.plan)
		if v, isInvalid := errors.AsType[*ValidationError](err); tc.ok != (err == nil) || (err != nil && (!isInvalid || v.Field != "plan_id")) {
			t.Errorf("plan %+v: %v, want ok %t", tc.plan, err, tc.ok)
		}
	}
}
