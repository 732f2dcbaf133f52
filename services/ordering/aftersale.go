package ordering

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
)

// EsimSelection names the eSIMs a change applies to: by id within Scope
// (nil: any), or by ICCID within Environment.
type EsimSelection struct {
	Scope       *Scope
	IDs         []uuid.UUID
	Environment Environment
	ICCIDs      []string
}

// EsimRef is an eSIM as the usage reader pages through them.
type EsimRef struct {
	ID    uuid.UUID
	ICCID string
}

// LifecycleStore is the part of the Store that moves eSIMs after their
// order.
type LifecycleStore interface {
	// ChangeEsims runs change on each selected eSIM in one transaction,
	// holding their row locks, and stores each it changed with its
	// events' publications. An error from change rolls everything back
	// and is returned. It returns the selected eSIMs as change left
	// them, without their top-ups; none for a selection that matches
	// nothing.
	ChangeEsims(ctx context.Context, sel EsimSelection, change func(*Esim) (changed bool, events []Event, err error)) ([]Esim, error)
	// EsimsInUse returns up to limit eSIMs of env that a network may
	// still report on (INSTALLED, ACTIVE, DEPLETED, and ALLOCATED ones,
	// whose install notice may have been lost), by id after after.
	EsimsInUse(ctx context.Context, env Environment, after uuid.UUID, limit int32) ([]EsimRef, error)
	// DueEsims returns up to limit ids of ACTIVE or DEPLETED eSIMs that
	// expired by now, or expire by now+notice and were not told so.
	DueEsims(ctx context.Context, now time.Time, notice time.Duration, limit int32) ([]uuid.UUID, error)
}

// changeEsims runs a domain change on the selected eSIMs and writes the
// events it makes.
func (s *Service) changeEsims(ctx context.Context, sel EsimSelection, change func(*Esim) (EsimChange, error)) ([]Esim, error) {
	return s.store.ChangeEsims(ctx, sel, func(e *Esim) (bool, []Event, error) {
		c, err := change(e)
		if err != nil || !c.Changed {
			return false, nil, err
		}
		events, err := s.esimEvents(*e, c)
		return true, events, err
	})
}

// The actions of Simulate.
const (
	ActionInstall  = "install"
	ActionActivate = "activate"
	ActionConsume  = "consume"
	ActionExpire   = "expire"
)

// Simulation is what a sandbox partner has happen to an eSIM.
type Simulation struct {
	// Action is install, activate, consume or expire.
	Action string
	// Bytes is consume's data used, at least 1; nil for the others.
	Bytes *int64
}

// Simulate moves a sandbox eSIM as a device and the network would, with
// the events they would cause, and returns it. ErrNotFound outside the
// sandbox; a *ValidationError naming action for an action the eSIM's
// status does not allow (activate before install, consume when not
// ACTIVE, expire when EXPIRED), naming bytes when consume lacks them or
// another action has them.
func (s *Service) Simulate(ctx context.Context, scope Scope, id uuid.UUID, sim Simulation) (Esim, error) {
	if err := validScope(&scope); err != nil {
		return Esim{}, err
	}
	if scope.Environment != Sandbox {
		// Live eSIMs move only as their network says.
		return Esim{}, ErrNotFound
	}
	switch sim.Action {
	case ActionInstall, ActionActivate, ActionExpire:
		if sim.Bytes != nil {
			return Esim{}, invalid("bytes", "is taken with consume only")
		}
	case ActionConsume:
		if sim.Bytes == nil || *sim.Bytes < 1 {
			return Esim{}, invalid("bytes", "must be a whole number of bytes, at least 1")
		}
	case "":
		return Esim{}, invalid("action", "is required: install, activate, consume or expire")
	default:
		return Esim{}, invalid("action", "must be install, activate, consume or expire")
	}
	now := input.Now(s.now)
	changed, err := s.changeEsims(ctx, EsimSelection{Scope: &scope, IDs: []uuid.UUID{id}}, func(e *Esim) (EsimChange, error) {
		var c EsimChange
		var err error
		switch sim.Action {
		case ActionInstall:
			c, err = e.Installed(now)
		case ActionActivate:
			c, err = e.Activated(now)
		case ActionConsume:
			c, err = e.Consume(*sim.Bytes, now)
		case ActionExpire:
			c, err = e.Expired(now)
		}
		if oo, ok := errors.AsType[errOutOfOrder](err); ok {
			return c, invalid("action", oo.Error())
		}
		return c, err
	})
	if err != nil {
		return Esim{}, fmt.Errorf("simulate %s on eSIM %s: %w", sim.Action, id, err)
	}
	if len(changed) == 0 {
		return Esim{}, ErrNotFound
	}
	return s.GetEsim(ctx, &scope, id)
}

// HandleDownloadProgress applies an SM-DP+'s report on a live profile: a
// successful installation moves its eSIM to INSTALLED. ErrNotFound for an
// ICCID no live eSIM has; a report the eSIM is past (replayed, or after a
// later step) changes nothing and is no error, so that the SM-DP+ does
// not send it again.
func (s *Service) HandleDownloadProgress(ctx context.Context, p DownloadProgress) error {
	if !ValidICCID(p.ICCID) {
		return ErrNotFound
	}
	if !p.Installed {
		return nil
	}
	now := input.Now(s.now)
	at := p.At
	if at.IsZero() || at.After(now) {
		at = now
	}
	changed, err := s.changeEsims(ctx, EsimSelection{Environment: Live, ICCIDs: []string{p.ICCID}}, func(e *Esim) (EsimChange, error) {
		c, err := e.Installed(at)
		if _, ok := errors.AsType[errOutOfOrder](err); ok {
			return EsimChange{}, nil
		}
		return c, err
	})
	if err != nil {
		return fmt.Errorf("download progress of %s: %w", p.ICCID, err)
	}
	if len(changed) == 0 {
		return ErrNotFound
	}
	return nil
}

// UsageBatch is how many eSIMs one usage read asks the network about.
const UsageBatch = 500

// ReadUsage asks each environment's network about every eSIM it may
// report on and applies the readings (ApplyUsage). It reads in batches of
// UsageBatch and stops at the first failure; the next pass starts over.
func (s *Service) ReadUsage(ctx context.Context) (int, error) {
	applied := 0
	for env, n := range s.networks {
		if n == nil {
			continue
		}
		after := uuid.Nil
		for {
			refs, err := s.store.EsimsInUse(ctx, env, after, UsageBatch)
			if err != nil {
				return applied, fmt.Errorf("read usage: list %s eSIMs: %w", env, err)
			}
			if len(refs) == 0 {
				break
			}
			iccids := make([]string, len(refs))
			for i, r := range refs {
				iccids[i] = r.ICCID
			}
			readings, err := n.Usage(ctx, iccids)
			if err != nil {
				return applied, fmt.Errorf("read usage of %d %s eSIMs: %w", len(iccids), env, err)
			}
			k, err := s.ApplyUsage(ctx, env, readings)
			applied += k
			if err != nil {
				return applied, err
			}
			after = refs[len(refs)-1].ID
		}
	}
	return applied, nil
}

// ApplyUsage applies a network's readings to the eSIMs of env in one
// transaction and returns how many it changed: a first attach installs
// (when the install notice never came) and activates the eSIM, and the
// data used moves it through its thresholds. Readings of unknown ICCIDs,
// and those older than what the eSIM has, change nothing.
func (s *Service) ApplyUsage(ctx context.Context, env Environment, readings []UsageReading) (int, error) {
	if len(readings) == 0 {
		return 0, nil
	}
	now := input.Now(s.now)
	byICCID := make(map[string]UsageReading, len(readings))
	iccids := make([]string, 0, len(readings))
	for _, r := range readings {
		if r.ReadAt.IsZero() || r.ReadAt.After(now) {
			r.ReadAt = now
		}
		if !r.AttachedAt.IsZero() && r.AttachedAt.After(r.ReadAt) {
			r.AttachedAt = r.ReadAt
		}
		if _, seen := byICCID[r.ICCID]; !seen {
			iccids = append(iccids, r.ICCID)
		}
		byICCID[r.ICCID] = r
	}
	n := 0
	_, err := s.changeEsims(ctx, EsimSelection{Environment: env, ICCIDs: iccids}, func(e *Esim) (EsimChange, error) {
		r := byICCID[e.ICCID]
		var c EsimChange
		add := func(more EsimChange) {
			c.Changed = c.Changed || more.Changed
			c.Events = append(c.Events, more.Events...)
		}
		if !r.AttachedAt.IsZero() {
			if e.Status == EsimAllocated {
				more, _ := e.Installed(r.AttachedAt)
				add(more)
			}
			if e.Status == EsimInstalled {
				more, _ := e.Activated(r.AttachedAt)
				add(more)
			}
		}
		add(e.ReadUsage(r.UsedBytes, r.ReadAt))
		if c.Changed {
			n++
		}
		return c, nil
	})
	if err != nil {
		return 0, fmt.Errorf("apply %d usage readings: %w", len(readings), err)
	}
	return n, nil
}

// ExpiryBatch is the most eSIMs one expiry pass moves; the next pass
// takes the rest.
const ExpiryBatch = 500

// ExpireDue tells the eSIMs expiring within ExpiringNotice so, once, and
// expires those whose ExpiresAt passed, as of the Service's clock. It
// returns how many it moved. The scheduled job calls it; a top-up that
// moved an expiry is read here, so nothing needs rescheduling.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	now := input.Now(s.now)
	ids, err := s.store.DueEsims(ctx, now, ExpiringNotice, ExpiryBatch)
	if err != nil {
		return 0, fmt.Errorf("expire: list due eSIMs: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	n := 0
	_, err = s.changeEsims(ctx, EsimSelection{IDs: ids}, func(e *Esim) (EsimChange, error) {
		c := e.ExpireIfDue(now)
		if c.Changed {
			n++
		}
		return c, nil
	})
	if err != nil {
		return 0, fmt.Errorf("expire %d eSIMs: %w", len(ids), err)
	}
	return n, nil
}
