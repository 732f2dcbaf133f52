package smdpsim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The simulator plays the device and the mobile network too: a released
// profile is downloaded and installed on a device (Install), which the
// SM-DP+ reports to the operator over ES2+ handleDownloadProgressInfo
// (Notifier); the device attaches to the network and uses data (Attach,
// Use), which the network's usage feed tells (Usage); and the network
// sells bundles on a profile (AddBundle).

// StateInstalled is a profile downloaded and installed on a device.
const StateInstalled ProfileState = "Installed"

// Events of a profile's history on the device and the network.
const (
	EventDownloaded = "downloaded"
	EventInstalled  = "installed"
	EventAttached   = "attached"
)

// The notification points of handleDownloadProgressInfo (SGP.22 5.3.5)
// the simulator reports.
const (
	NotificationBPPDownload     = 3
	NotificationBPPInstallation = 4
)

// MaxUsageICCIDs bounds the ICCIDs of one usage read.
const MaxUsageICCIDs = 1000

// Notification is one handleDownloadProgressInfo the SM-DP+ sends the
// operator: a step of a profile's download, with its outcome.
type Notification struct {
	ICCID       string
	EID         string
	ProfileType string
	Point       int
	// Status is the step's execution status: Executed-Success here.
	Status    string
	Timestamp time.Time
}

// Notifier sends notifications to the operator. An error is the
// operator's refusal or no answer; the simulator reports it and changes
// nothing for it, as the device has the profile whatever the operator
// says.
type Notifier interface {
	Notify(ctx context.Context, n Notification) error
}

// NotificationResult is what became of one notification.
type NotificationResult struct {
	Point int `json:"notificationPointId"`
	// Sent is false when no operator is configured.
	Sent bool `json:"sent"`
	// Error is the operator's refusal, or why no answer came; "" when it
	// accepted.
	Error string `json:"error,omitempty"`
}

// InstallResult is the profile as installed and what the operator was
// told.
type InstallResult struct {
	Device        Device               `json:"device"`
	Notifications []NotificationResult `json:"notifications"`
}

// Device is a profile as the device and the network see it.
type Device struct {
	ICCID       string    `json:"iccid"`
	EID         string    `json:"eid,omitempty"`
	InstalledAt time.Time `json:"installedAt"`
	// AttachedAt is the first network attach; zero before.
	AttachedAt time.Time `json:"attachedAt,omitzero"`
	UsedBytes  int64     `json:"usedBytes"`
}

// UsageReading is the network's reading of one profile.
type UsageReading struct {
	ICCID      string
	AttachedAt time.Time
	UsedBytes  int64
	ReadAt     time.Time
}

// Bundle is data and days the network added to a profile, once per
// TopUpID.
type Bundle struct {
	TopUpID string `json:"topupId"`
	ICCID   string `json:"iccid"`
	Bytes   int64  `json:"bytes"`
	Days    int32  `json:"days"`
}

// ErrUnknownICCID is an ICCID the network has no profile of.
var ErrUnknownICCID = errors.New("unknown ICCID")

// ErrBundleConflict is a top-up id already used for another bundle.
var ErrBundleConflict = errors.New("the topup_id was used for another bundle")

// ErrNotAllowed is a device step the profile is not ready for.
var ErrNotAllowed = errors.New("not allowed")

type device struct {
	installedAt time.Time
	attachedAt  time.Time
	usedBytes   int64
}

// Install downloads and installs the profile iccid on a device of eid ("":
// the EID it is bound to, if any) and reports both steps to the operator.
// The profile must be released for download. A profile already installed
// is reported again, as an SM-DP+ retrying its notifications does.
func (s *Sim) Install(ctx context.Context, iccid, eid string) (InstallResult, error) {
	iccid = unpad(iccid)
	s.mu.Lock()
	p := s.touched[iccid]
	switch {
	case p == nil:
		s.mu.Unlock()
		return InstallResult{}, fmt.Errorf("%s: %w", iccid, ErrUnknownICCID)
	case p.state == StateReleased:
		if eid != "" {
			p.eid = eid
		}
		now := s.now()
		s.set(p, StateInstalled)
		p.device = &device{installedAt: now}
		p.history = append(p.history, EventDownloaded, EventInstalled)
	case p.state != StateInstalled:
		s.mu.Unlock()
		return InstallResult{}, fmt.Errorf("profile %s is %s, not Released: %w", iccid, p.state, ErrNotAllowed)
	}
	dev := p.deviceView()
	base := Notification{ICCID: iccid, EID: p.eid, ProfileType: p.pool.profileType, Status: "Executed-Success"}
	notifier := s.notifier
	s.mu.Unlock()

	res := InstallResult{Device: dev}
	for _, point := range []int{NotificationBPPDownload, NotificationBPPInstallation} {
		n := base
		n.Point, n.Timestamp = point, dev.InstalledAt
		r := NotificationResult{Point: point}
		if notifier != nil {
			r.Sent = true
			if err := notifier.Notify(ctx, n); err != nil {
				r.Error = err.Error()
			}
		}
		res.Notifications = append(res.Notifications, r)
	}
	return res, nil
}

// Attach attaches the device of an installed profile to the network; the
// first attach is kept.
func (s *Sim) Attach(iccid string) (Device, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.installed(unpad(iccid))
	if err != nil {
		return Device{}, err
	}
	if p.device.attachedAt.IsZero() {
		p.device.attachedAt = s.now()
		p.history = append(p.history, EventAttached)
	}
	return p.deviceView(), nil
}

// Use makes the attached device of iccid use bytes of data.
func (s *Sim) Use(iccid string, bytes int64) (Device, error) {
	if bytes < 1 {
		return Device{}, &ValidationError{Field: "bytes", Reason: "must be 1 or more"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.installed(unpad(iccid))
	if err != nil {
		return Device{}, err
	}
	if p.device.attachedAt.IsZero() {
		return Device{}, fmt.Errorf("profile %s never attached to the network: %w", p.iccid, ErrNotAllowed)
	}
	if p.device.usedBytes > 1<<62-bytes {
		return Device{}, &ValidationError{Field: "bytes", Reason: "the total would overflow"}
	}
	p.device.usedBytes += bytes
	return p.deviceView(), nil
}

func (s *Sim) installed(iccid string) (*profile, error) {
	p := s.touched[iccid]
	switch {
	case p == nil:
		return nil, fmt.Errorf("%s: %w", iccid, ErrUnknownICCID)
	case p.device == nil:
		return nil, fmt.Errorf("profile %s is %s, not Installed: %w", iccid, p.state, ErrNotAllowed)
	}
	return p, nil
}

func (p *profile) deviceView() Device {
	d := Device{ICCID: p.iccid, EID: p.eid}
	if p.device != nil {
		d.InstalledAt, d.AttachedAt, d.UsedBytes = p.device.installedAt, p.device.attachedAt, p.device.usedBytes
	}
	return d
}

// issued is a profile the network serves: one an order released, on a
// device or not yet.
func (p *profile) issued() bool {
	return p != nil && (p.state == StateReleased || p.state == StateInstalled)
}

// Usage reads the profiles of iccids the network serves, leaving out the
// others.
func (s *Sim) Usage(iccids []string) ([]UsageReading, error) {
	if len(iccids) > MaxUsageICCIDs {
		return nil, &ValidationError{Field: "iccids", Reason: fmt.Sprintf("%d ICCIDs: at most %d at once", len(iccids), MaxUsageICCIDs)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := []UsageReading{}
	seen := map[string]bool{}
	for _, iccid := range iccids {
		iccid = unpad(iccid)
		p := s.touched[iccid]
		if !p.issued() || seen[iccid] {
			continue
		}
		seen[iccid] = true
		r := UsageReading{ICCID: iccid, ReadAt: now}
		if p.device != nil {
			r.AttachedAt, r.UsedBytes = p.device.attachedAt, p.device.usedBytes
		}
		out = append(out, r)
	}
	return out, nil
}

// AddBundle adds b to its profile once: a second call with the same
// TopUpID and the same bundle adds nothing and answers added false; with
// another bundle it is ErrBundleConflict. ErrUnknownICCID for a profile
// the network does not serve.
func (s *Sim) AddBundle(b Bundle) (added bool, err error) {
	b.ICCID = unpad(b.ICCID)
	switch {
	case b.TopUpID == "" || len(b.TopUpID) > 64:
		return false, &ValidationError{Field: "topup_id", Reason: "required, at most 64 characters"}
	case b.ICCID == "":
		return false, &ValidationError{Field: "iccid", Reason: "required"}
	case b.Bytes < 0:
		return false, &ValidationError{Field: "bytes", Reason: "must be 0 (days only) or more"}
	case b.Days < 0 || (b.Bytes == 0 && b.Days == 0):
		return false, &ValidationError{Field: "days", Reason: "must be 0 or more, and above 0 when bytes is 0"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.bundles[b.TopUpID]; ok {
		if prev != b {
			return false, fmt.Errorf("topup_id %s: %w", clip(b.TopUpID), ErrBundleConflict)
		}
		return false, nil
	}
	if !s.touched[b.ICCID].issued() {
		return false, fmt.Errorf("%s: %w", b.ICCID, ErrUnknownICCID)
	}
	s.bundles[b.TopUpID] = b
	return true, nil
}

func (s *Sim) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now().UTC()
	}
	return time.Now().UTC()
}

// SetNotifier makes n the operator the Sim reports downloads to; nil
// reports to no one.
func (s *Sim) SetNotifier(n Notifier) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notifier = n
}

// devicesAndBundles fills in State's Devices and Bundles; under s.mu.
func (s *Sim) devicesAndBundles(st *State) {
	st.Devices, st.Bundles = []Device{}, []Bundle{}
	for _, p := range s.touched {
		if p.device != nil {
			st.Devices = append(st.Devices, p.deviceView())
		}
	}
	slices.SortFunc(st.Devices, func(a, b Device) int { return strings.Compare(a.ICCID, b.ICCID) })
	for _, b := range s.bundles {
		st.Bundles = append(st.Bundles, b)
	}
	slices.SortFunc(st.Bundles, func(a, b Bundle) int { return strings.Compare(a.TopUpID, b.TopUpID) })
}
