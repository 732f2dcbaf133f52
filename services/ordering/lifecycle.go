package ordering

import (
	"fmt"
	"time"

	"github.com/esimplatform/esim/proto/limits"
)

// An eSIM's statuses. It moves only forward: ALLOCATED (issued) ->
// INSTALLED (downloaded and installed on a device) -> ACTIVE (first
// network attach; the validity clock starts) -> DEPLETED (a fixed plan's
// data used up; a top-up makes it ACTIVE again) or EXPIRED (validity
// over; final). The database refuses any other move (migration 00007).
const (
	EsimInstalled = "INSTALLED"
	EsimActive    = "ACTIVE"
	EsimDepleted  = "DEPLETED"
	EsimExpired   = "EXPIRED"
)

// EsimStatuses lists an eSIM's statuses in their order.
var EsimStatuses = []string{EsimAllocated, EsimInstalled, EsimActive, EsimDepleted, EsimExpired}

// The events of an eSIM's life after its order, and of top-ups.
const (
	EventEsimInstalled  EventType = limits.EventEsimInstalled
	EventEsimActivated  EventType = limits.EventEsimActivated
	EventEsimUsage      EventType = limits.EventEsimUsage
	EventEsimExpiring   EventType = limits.EventEsimExpiring
	EventEsimExpired    EventType = limits.EventEsimExpired
	EventTopUpCompleted EventType = limits.EventTopUpCompleted
	EventTopUpFailed    EventType = limits.EventTopUpFailed
)

// UsageThresholds are the percentages of an eSIM's total bytes whose
// crossing is told once each (esim.usage).
var UsageThresholds = []int32{50, 80, 100}

// ExpiringNotice is how long before its expiry an eSIM's esim.expiring is
// sent.
const ExpiringNotice = 24 * time.Hour

// EsimChange is what happened to an eSIM in one change: the events it
// makes, in order, each with the eSIM as it stood after the change.
type EsimChange struct {
	Events []EsimEvent
	// Changed is false when the change found nothing to do (a replayed
	// notification, a reading older than the last).
	Changed bool
}

// EsimEvent is an event of an eSIM's; Threshold is set on esim.usage.
type EsimEvent struct {
	Type      EventType
	Threshold int32
}

// errOutOfOrder is a move the eSIM's status does not allow.
type errOutOfOrder struct {
	action, status string
}

func (e errOutOfOrder) Error() string {
	return fmt.Sprintf("cannot %s an eSIM that is %s", e.action, e.status)
}

// Installed records that the profile was installed on a device at. Only an
// ALLOCATED eSIM installs.
func (e *Esim) Installed(at time.Time) (EsimChange, error) {
	if e.Status != EsimAllocated {
		return EsimChange{}, errOutOfOrder{"install", e.Status}
	}
	e.Status, e.InstalledAt = EsimInstalled, at
	return EsimChange{Changed: true, Events: []EsimEvent{{Type: EventEsimInstalled}}}, nil
}

// Activated records the eSIM's first network attach at: the validity clock
// starts. Only an INSTALLED eSIM activates.
func (e *Esim) Activated(at time.Time) (EsimChange, error) {
	if e.Status != EsimInstalled {
		return EsimChange{}, errOutOfOrder{"activate", e.Status}
	}
	e.Status, e.ActivatedAt = EsimActive, at
	e.ExpiresAt = at.Add(time.Duration(e.ValidityDays) * 24 * time.Hour)
	c := EsimChange{Changed: true, Events: []EsimEvent{{Type: EventEsimActivated}}}
	// Data used before the attach was told (a network's feed may read
	// both at once) counts from here.
	c.Events = append(c.Events, e.crossed()...)
	return c, nil
}

// Consume adds bytes of data used, as of at. Only an ACTIVE eSIM
// consumes; on a fixed plan use stops at the total, where the eSIM is
// DEPLETED.
func (e *Esim) Consume(bytes int64, at time.Time) (EsimChange, error) {
	if e.Status != EsimActive {
		return EsimChange{}, errOutOfOrder{"consume data on", e.Status}
	}
	used := e.Data.UsedBytes + bytes
	if used < e.Data.UsedBytes { // overflow
		used = maxBytes
	}
	return e.use(used, at), nil
}

// maxBytes is the most an unlimited eSIM's use is counted to.
const maxBytes = int64(1) << 62

// ReadUsage applies what the network read: the data used in all as of
// at. Readings only move forward; an older or smaller one changes
// nothing. Use read on an eSIM not ACTIVE is recorded (a network counts
// what it counts) but moves no status.
func (e *Esim) ReadUsage(used int64, at time.Time) EsimChange {
	if used <= e.Data.UsedBytes || !at.After(e.Data.UpdatedAt) || e.Status == EsimExpired {
		return EsimChange{}
	}
	if e.Status != EsimActive {
		e.Data.UsedBytes, e.Data.UpdatedAt = e.capped(used), at
		return EsimChange{Changed: true}
	}
	return e.use(used, at)
}

// capped is used bytes as the eSIM counts them: at most its total.
func (e *Esim) capped(used int64) int64 {
	if !e.Data.Unlimited && used > e.Data.TotalBytes {
		return e.Data.TotalBytes
	}
	return used
}

// use sets the data used of an ACTIVE eSIM, tells each threshold it
// crossed and depletes a fixed plan used up.
func (e *Esim) use(used int64, at time.Time) EsimChange {
	e.Data.UsedBytes, e.Data.UpdatedAt = e.capped(used), at
	c := EsimChange{Changed: true, Events: e.crossed()}
	if !e.Data.Unlimited && e.Data.UsedBytes >= e.Data.TotalBytes {
		e.Status = EsimDepleted
	}
	return c
}

// crossed returns an esim.usage event for each threshold the use reached
// that was not told yet, and records them told.
func (e *Esim) crossed() []EsimEvent {
	if e.Data.Unlimited || e.Data.TotalBytes <= 0 {
		return nil
	}
	var out []EsimEvent
	pct := e.usedPercent()
	for _, t := range UsageThresholds {
		if pct >= t && e.UsageNotified < t {
			out = append(out, EsimEvent{Type: EventEsimUsage, Threshold: t})
			e.UsageNotified = t
		}
	}
	return out
}

// usedPercent is the data used as a whole percentage of the total,
// rounded down.
func (e *Esim) usedPercent() int32 {
	// In float64 only for the comparison with thresholds: bytes stay
	// integers everywhere else.
	return int32(float64(e.Data.UsedBytes) * 100 / float64(e.Data.TotalBytes))
}

// Expired ends the eSIM's validity at: EXPIRED, final. A sandbox eSIM
// expires on request in any status but EXPIRED; the scheduled expiry
// calls it at ExpiresAt.
func (e *Esim) Expired(at time.Time) (EsimChange, error) {
	if e.Status == EsimExpired {
		return EsimChange{}, errOutOfOrder{"expire", e.Status}
	}
	e.Status, e.ExpiresAt = EsimExpired, at
	return EsimChange{Changed: true, Events: []EsimEvent{{Type: EventEsimExpired}}}, nil
}

// ExpireIfDue expires an eSIM whose ExpiresAt has passed at now, and
// tells one ExpiringNotice from it that it is expiring, once. Due, not
// scheduled: a top-up that moved ExpiresAt since the job was planned is
// read here.
func (e *Esim) ExpireIfDue(now time.Time) EsimChange {
	if e.ExpiresAt.IsZero() || (e.Status != EsimActive && e.Status != EsimDepleted) {
		return EsimChange{}
	}
	if !now.Before(e.ExpiresAt) {
		e.Status = EsimExpired
		return EsimChange{Changed: true, Events: []EsimEvent{{Type: EventEsimExpired}}}
	}
	if !e.ExpiringNotified && !now.Before(e.ExpiresAt.Add(-ExpiringNotice)) {
		e.ExpiringNotified = true
		return EsimChange{Changed: true, Events: []EsimEvent{{Type: EventEsimExpiring}}}
	}
	return EsimChange{}
}

// ApplyTopUp adds a top-up's bytes and days: a DEPLETED eSIM with data
// left again is ACTIVE, thresholds below the new use are told again when
// crossed, and an expiry moved past the notice is told again. ErrEsimExpired
// for an eSIM that expired since the top-up was bought: it is refunded.
func (e *Esim) ApplyTopUp(bytes int64, days int32, now time.Time) error {
	if e.Status == EsimExpired {
		return ErrEsimExpired
	}
	if !e.Data.Unlimited {
		e.Data.TotalBytes += bytes
		e.UsageNotified = 0
		for _, t := range UsageThresholds {
			if e.usedPercent() >= t {
				e.UsageNotified = t
			}
		}
	}
	e.ValidityDays += days
	if !e.ExpiresAt.IsZero() {
		e.ExpiresAt = e.ExpiresAt.Add(time.Duration(days) * 24 * time.Hour)
		if now.Before(e.ExpiresAt.Add(-ExpiringNotice)) {
			e.ExpiringNotified = false
		}
	}
	if e.Status == EsimDepleted && e.Data.UsedBytes < e.Data.TotalBytes {
		e.Status = EsimActive
	}
	return nil
}

// CompatibleTopUp says whether plan may top up e: the same type, covering
// every country e's plan covers. A *ValidationError naming plan_id when
// not.
func CompatibleTopUp(e Esim, plan Plan) error {
	if (plan.Type == PlanPerDay) != e.PerDay {
		want := PlanFixed
		if e.PerDay {
			want = PlanPerDay
		}
		return invalid("plan_id", fmt.Sprintf("must be a %s plan, as the eSIM's is", want))
	}
	covered := make(map[string]bool, len(plan.Countries))
	for _, c := range plan.Countries {
		covered[c] = true
	}
	for _, c := range e.Countries {
		if !covered[c] {
			return invalid("plan_id", fmt.Sprintf("must cover every country the eSIM's plan covers; it does not cover %s", c))
		}
	}
	return nil
}
