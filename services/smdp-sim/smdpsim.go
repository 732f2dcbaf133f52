// Package smdpsim is an SM-DP+ simulator: pools of eSIM profiles per
// profile type and the SGP.22 ES2+ functions that reserve, confirm,
// release and cancel them, read strictly, with faults a test can inject
// and vendor styles it can play (Vendor). Calls are deduplicated by
// header (Header). It plays the device and the mobile network too
// (network.go): installs reported to the operator, attach, data used,
// bundles. State lives in memory behind one mutex; the transports are
// es2plus (the functions, and the notifier of the operator), network (the
// usage feed and bundles) and control (state, faults, vendors, devices).
package smdpsim

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The ES2+ functions the simulator serves, as named in their paths.
const (
	FunctionDownloadOrder  = "downloadOrder"
	FunctionConfirmOrder   = "confirmOrder"
	FunctionCancelOrder    = "cancelOrder"
	FunctionReleaseProfile = "releaseProfile"
)

// Functions are the ES2+ functions: the three every order may call, in
// the order it calls them, then releaseProfile, which releases a profile
// confirmed without its releaseFlag.
var Functions = []string{FunctionDownloadOrder, FunctionConfirmOrder, FunctionCancelOrder, FunctionReleaseProfile}

// Values of cancelOrder's finalProfileStatusIndicator.
const (
	FinalAvailable   = "Available"
	FinalUnavailable = "Unavailable"
)

// ProfileState is where a profile is in its life at the SM-DP+.
type ProfileState string

const (
	StateAvailable   ProfileState = "Available"
	StateAllocated   ProfileState = "Allocated"
	StateConfirmed   ProfileState = "Confirmed"
	StateReleased    ProfileState = "Released"
	StateUnavailable ProfileState = "Unavailable"
)

// Events recorded in a profile's history.
const (
	EventAllocated = "allocated"
	EventConfirmed = "confirmed"
	EventReleased  = "released"
	EventCancelled = "cancelled"
)

// Fault modes. fail, hang and garbage replace the call: the function is
// not executed. lose executes it (and remembers it, see Header) and loses
// its answer, as a crash or a cut connection after the SM-DP+ did its
// part would.
const (
	ModeFail    = "fail"
	ModeHang    = "hang"
	ModeGarbage = "garbage"
	ModeLose    = "lose"
)

// Modes are the fault modes.
var Modes = []string{ModeFail, ModeHang, ModeGarbage, ModeLose}

// Defaults of a Fault's optional fields.
const (
	DefaultFaultSubject = "1.6"
	DefaultFaultReason  = "6.1"
	DefaultFaultMessage = "fault injected by the control API"
	DefaultFaultHang    = time.Hour
)

const (
	// MaxPools keeps the pool index within the two digits it has in an
	// ICCID.
	MaxPools = 100
	// MaxPoolSize bounds a pool; profiles are made when first touched,
	// so a large pool costs nothing until used.
	MaxPoolSize = 1_000_000
	// MaxRemembered bounds the calls remembered for deduplication
	// (Header): the oldest is forgotten first. A caller sends a lost
	// call again within minutes, long before 100,000 others.
	MaxRemembered = 100_000
	maxHang       = 24 * time.Hour
	maxText       = 256
)

// Pool is a configured pool: how many profiles of a type the SM-DP+ holds.
type Pool struct {
	ProfileType string
	Count       int
}

var profileTypeName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ParsePools reads pools written as comma-separated type:count entries,
// such as "esim-travel:10000,esim-data:50".
func ParsePools(s string) ([]Pool, error) {
	var pools []Pool
	seen := map[string]bool{}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		name, count, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fmt.Errorf("%q: want type:count, such as esim-travel:10000", entry)
		}
		if !profileTypeName.MatchString(name) {
			return nil, fmt.Errorf("%q: the type must be 1 to 64 of A-Z a-z 0-9 . _ -", entry)
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 || n > MaxPoolSize {
			return nil, fmt.Errorf("%q: the count must be a number from 1 to %d", entry, MaxPoolSize)
		}
		if seen[name] {
			return nil, fmt.Errorf("%q: profile type %s is listed twice", entry, name)
		}
		seen[name] = true
		pools = append(pools, Pool{ProfileType: name, Count: n})
	}
	if len(pools) > MaxPools {
		return nil, fmt.Errorf("%d profile types: at most %d", len(pools), MaxPools)
	}
	return pools, nil
}

// Config is what a Sim is made of.
type Config struct {
	// SMDPAddress is the address confirmOrder answers, which goes into
	// activation codes.
	SMDPAddress string
	Pools       []Pool
	// Now is the clock of device and network times; time.Now when nil.
	Now func() time.Time
}

// Fault makes matching calls misbehave: instead of executing, or, in mode
// lose, after.
type Fault struct {
	// ID is given by AddFault.
	ID       string `json:"id,omitempty"`
	Function string `json:"function"`
	// ProfileType limits the fault to calls for that type ("" = any); for
	// confirmOrder and cancelOrder it is the type of the iccid's profile.
	ProfileType string `json:"profileType,omitempty"`
	Mode        string `json:"mode"`
	// Count is how many matching calls fault (0 = until cleared).
	Count int `json:"count,omitempty"`
	// SkipCount lets that many matching calls through first, so a test
	// can fault a later call than the next.
	SkipCount int `json:"skip,omitempty"`
	// SubjectCode, ReasonCode and Message make the Failed answer of mode
	// fail.
	SubjectCode string `json:"subjectCode,omitempty"`
	ReasonCode  string `json:"reasonCode,omitempty"`
	Message     string `json:"message,omitempty"`
	// Hang is how long mode hang holds a call, unless the caller gives
	// up or the Sim is closed first.
	Hang time.Duration `json:"hang,omitempty"`
	// Remaining is, in State, the calls the fault still applies to (0
	// with Count 0: until cleared).
	Remaining int `json:"remaining,omitempty"`
}

type faultJSON Fault

// MarshalJSON writes Hang as a Go duration ("2s"), as the control API
// takes it.
func (f Fault) MarshalJSON() ([]byte, error) {
	w := struct {
		faultJSON
		Hang string `json:"hang,omitempty"`
	}{faultJSON: faultJSON(f)}
	if f.Hang != 0 {
		w.Hang = f.Hang.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *Fault) UnmarshalJSON(data []byte) error {
	var w struct {
		faultJSON
		Hang string `json:"hang,omitempty"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*f = Fault(w.faultJSON)
	f.Hang = 0
	if w.Hang != "" {
		d, err := time.ParseDuration(w.Hang)
		if err != nil {
			return &ValidationError{Field: "hang", Reason: err.Error()}
		}
		f.Hang = d
	}
	return nil
}

// Header identifies a call as its ES2+ header does. A function the Sim
// executed under a header with both identifiers is remembered (the last
// MaxRemembered of them): the same call sent again under the same
// header, as a caller that lost the answer does, is answered the first
// execution's result again (the same ICCID, the same refusal) and
// executes nothing. Real SM-DP+s need not do so; the platform's
// reconciliation of lost answers relies on it (docs/decisions.md). A
// zero Header is never remembered.
type Header struct {
	FunctionRequesterIdentifier string
	FunctionCallIdentifier      string
}

// DownloadOrderRequest reserves a profile of ProfileType, or the profile
// ICCID.
type DownloadOrderRequest struct {
	Header      Header
	EID         string
	ICCID       string
	ProfileType string
}

// DownloadOrderResult is the reserved profile's ICCID as the SM-DP+
// answers it: F-padded to 20 characters under a vendor's PaddedICCIDs.
type DownloadOrderResult struct {
	ICCID   string
	Warning *Warning
}

// ConfirmOrderRequest confirms, and with ReleaseFlag releases, an
// allocated profile. ReleaseFlag is mandatory: nil is a request without
// it, which is refused.
type ConfirmOrderRequest struct {
	Header      Header
	ICCID       string
	EID         string
	MatchingID  string
	SMDSAddress string
	ReleaseFlag *bool
}

// ConfirmOrderResult is what an activation code is made of. SMDPAddress
// is "" under a vendor's OmitSMDPAddress.
type ConfirmOrderResult struct {
	EID         string
	MatchingID  string
	SMDPAddress string
	Warning     *Warning
}

// CancelOrderRequest gives a profile back.
type CancelOrderRequest struct {
	Header                      Header
	ICCID                       string
	EID                         string
	MatchingID                  string
	FinalProfileStatusIndicator string
}

// ReleaseProfileRequest releases a Confirmed profile.
type ReleaseProfileRequest struct {
	Header Header
	ICCID  string
}

// Result is what cancelOrder and releaseProfile answer besides success.
type Result struct {
	Warning *Warning
}

// Warning is the status code data of an Executed-WithWarning answer.
type Warning struct {
	SubjectCode       string
	ReasonCode        string
	SubjectIdentifier string
	Message           string
}

// The status codes of a vendor's Executed-WithWarning: about the profile
// type, with a reason no client has cause to read as a refusal.
const (
	WarningSubjectCode = SubjectProfileType
	WarningReasonCode  = "6.1"
	WarningMessage     = "executed with a warning (vendor setting executedWithWarning)"
)

// Vendor makes the Sim answer calls for one profile type as some real
// SM-DP+s do; the zero Vendor answers as SGP.22 reads most strictly.
type Vendor struct {
	ProfileType string `json:"profileType"`
	// PaddedICCIDs answers ICCIDs F-padded to 20 characters, as they
	// are stored on the card. Requests are taken padded or not, always.
	PaddedICCIDs bool `json:"paddedICCIDs"`
	// ExecutedWithWarning answers every success Executed-WithWarning,
	// with the Warning* status codes.
	ExecutedWithWarning bool `json:"executedWithWarning"`
	// OmitSMDPAddress leaves smdpAddress out of confirmOrder's answer,
	// as SGP.22 allows.
	OmitSMDPAddress bool `json:"omitSMDPAddress"`
}

func (v Vendor) warning() *Warning {
	if !v.ExecutedWithWarning {
		return nil
	}
	return &Warning{SubjectCode: WarningSubjectCode, ReasonCode: WarningReasonCode, SubjectIdentifier: v.ProfileType, Message: WarningMessage}
}

// State is everything a test may want to assert on.
type State struct {
	SMDPAddress string      `json:"smdpAddress"`
	Pools       []PoolState `json:"pools"`
	// Profiles are those touched since start or the last Reset, by ICCID.
	Profiles []Profile `json:"profiles"`
	Faults   []Fault   `json:"faults"`
	// Vendors are the vendor settings in force, by profile type.
	Vendors []Vendor `json:"vendors"`
	// Calls counts calls by function and outcome (see Outcome, and
	// OutcomeReplayed).
	Calls map[string]map[string]int `json:"calls"`
	// Devices are the installed profiles, by ICCID, and Bundles the
	// bundles added, by top-up id.
	Devices []Device `json:"devices"`
	Bundles []Bundle `json:"bundles"`
}

// PoolState counts a pool's profiles by state; Cancelled counts the
// successful cancelOrders.
type PoolState struct {
	ProfileType string `json:"profileType"`
	Available   int    `json:"available"`
	Allocated   int    `json:"allocated"`
	Confirmed   int    `json:"confirmed"`
	Released    int    `json:"released"`
	Installed   int    `json:"installed"`
	Unavailable int    `json:"unavailable"`
	Cancelled   int    `json:"cancelled"`
}

// Profile is one profile as State shows it.
type Profile struct {
	ICCID       string       `json:"iccid"`
	ProfileType string       `json:"profileType"`
	State       ProfileState `json:"state"`
	MatchingID  string       `json:"matchingId,omitempty"`
	EID         string       `json:"eid,omitempty"`
	History     []string     `json:"history"`
}

// Profile returns the profile iccid, if it was touched.
func (s State) Profile(iccid string) (Profile, bool) {
	for _, p := range s.Profiles {
		if p.ICCID == iccid {
			return p, true
		}
	}
	return Profile{}, false
}

// Pool returns the counts of profileType's pool.
func (s State) Pool(profileType string) (PoolState, bool) {
	for _, p := range s.Pools {
		if p.ProfileType == profileType {
			return p, true
		}
	}
	return PoolState{}, false
}

// Sim is the simulated SM-DP+. It is safe for concurrent use.
type Sim struct {
	cfg       Config
	closed    chan struct{}
	closeOnce sync.Once

	mu sync.Mutex
	// generation is the random block of this start's (or reset's) ICCIDs.
	generation int
	pools      []*pool
	byType     map[string]*pool
	touched    map[string]*profile
	matching   map[string]string // matchingId -> iccid, while in use
	faults     []*Fault
	faultSeq   int
	calls      map[string]map[string]int
	vendors    map[string]Vendor
	// executed remembers calls by header for deduplication; ring holds
	// their keys, oldest at next once full.
	executed map[callKey]executedCall
	ring     []callKey
	next     int
	// bundles are the network's bundles by top-up id; notifier is the
	// operator told of downloads (nil: no one).
	bundles  map[string]Bundle
	notifier Notifier
}

type callKey struct {
	requester, function, callID string
}

// executedCall is a remembered call: its request, to tell a call sent
// again from another under the same header, and what it answered.
type executedCall struct {
	request string
	result  any
	err     error
}

type pool struct {
	index       int
	profileType string
	count       int
	// Serials from next up were never handed out; drained makes them
	// Unavailable. Profiles are made when first touched, so a pool of a
	// million costs nothing until used.
	next    int
	drained bool
	// returned holds serials cancelled back to Available, oldest first.
	// An entry whose profile was since taken by its ICCID is stale and
	// skipped.
	returned  []int
	counts    map[ProfileState]int
	cancelled int
}

type profile struct {
	iccid      string
	pool       *pool
	serial     int
	state      ProfileState
	matchingID string
	eid        string
	history    []string
	// device is set once the profile is installed on one.
	device *device
}

// New makes a Sim with full pools.
func New(cfg Config) (*Sim, error) {
	if cfg.SMDPAddress == "" {
		return nil, errors.New("smdpsim: SMDPAddress is required")
	}
	if len(cfg.Pools) == 0 {
		return nil, errors.New("smdpsim: at least one pool is required")
	}
	if len(cfg.Pools) > MaxPools {
		return nil, fmt.Errorf("smdpsim: %d pools: at most %d", len(cfg.Pools), MaxPools)
	}
	seen := map[string]bool{}
	for _, p := range cfg.Pools {
		if !profileTypeName.MatchString(p.ProfileType) || p.Count < 1 || p.Count > MaxPoolSize || seen[p.ProfileType] {
			return nil, fmt.Errorf("smdpsim: pool %s:%d: want a unique type of A-Z a-z 0-9 . _ - and a count from 1 to %d", p.ProfileType, p.Count, MaxPoolSize)
		}
		seen[p.ProfileType] = true
	}
	cfg.Pools = slices.Clone(cfg.Pools)
	s := &Sim{cfg: cfg, closed: make(chan struct{})}
	s.reset()
	return s, nil
}

// Config returns what the Sim was made of.
func (s *Sim) Config() Config {
	c := s.cfg
	c.Pools = slices.Clone(c.Pools)
	return c
}

// Close ends every hanging call at once, and makes later hangs return at
// once: a server shutting down must not wait for them. The Sim still
// answers everything else.
func (s *Sim) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// Reset restores the configured pools and clears faults, history and
// counters.
func (s *Sim) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reset()
}

func (s *Sim) reset() {
	s.generation = newGeneration()
	s.pools = nil
	s.byType = map[string]*pool{}
	for i, c := range s.cfg.Pools {
		p := &pool{index: i, profileType: c.ProfileType, count: c.Count, counts: map[ProfileState]int{StateAvailable: c.Count}}
		s.pools = append(s.pools, p)
		s.byType[c.ProfileType] = p
	}
	s.touched = map[string]*profile{}
	s.matching = map[string]string{}
	s.faults = nil
	s.calls = map[string]map[string]int{}
	s.vendors = map[string]Vendor{}
	s.executed = map[callKey]executedCall{}
	s.ring = nil
	s.next = 0
	s.bundles = map[string]Bundle{}
}

// Drain makes every Available profile of profileType Unavailable, so the
// next downloadOrder for it finds the pool empty.
func (s *Sim) Drain(profileType string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pl, ok := s.byType[profileType]
	if !ok {
		return fmt.Errorf("profile type %q: %w", profileType, ErrNotFound)
	}
	pl.drained = true
	for _, serial := range pl.returned {
		if p := s.touched[s.iccidOf(pl.index, serial)]; p != nil && p.state == StateAvailable {
			s.set(p, StateUnavailable)
		}
	}
	pl.returned = nil
	// What is left Available is the untouched range, now drained.
	pl.counts[StateUnavailable] += pl.counts[StateAvailable]
	pl.counts[StateAvailable] = 0
	return nil
}

// AddFault validates f, fills in its defaults and an ID, and returns it
// as stored.
func (s *Sim) AddFault(f Fault) (Fault, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkFault(&f); err != nil {
		return Fault{}, err
	}
	s.faultSeq++
	f.ID = "fault-" + strconv.Itoa(s.faultSeq)
	f.Remaining = f.Count
	s.faults = append(s.faults, &f)
	return f, nil
}

var statusCode = regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{1,3}){0,3}$`)

func (s *Sim) checkFault(f *Fault) error {
	if !slices.Contains(Functions, f.Function) {
		return &ValidationError{Field: "function", Reason: fmt.Sprintf("%q is not one of %s", f.Function, strings.Join(Functions, ", "))}
	}
	if _, ok := s.byType[f.ProfileType]; f.ProfileType != "" && !ok {
		return &ValidationError{Field: "profileType", Reason: fmt.Sprintf("%q is not a configured profile type", f.ProfileType)}
	}
	if !slices.Contains(Modes, f.Mode) {
		return &ValidationError{Field: "mode", Reason: fmt.Sprintf("%q is not one of %s", f.Mode, strings.Join(Modes, ", "))}
	}
	if f.Count < 0 {
		return &ValidationError{Field: "count", Reason: "must be 0 (until cleared) or more"}
	}
	if f.SkipCount < 0 {
		return &ValidationError{Field: "skip", Reason: "must be 0 or more"}
	}
	for _, c := range []struct{ field, value string }{{"subjectCode", f.SubjectCode}, {"reasonCode", f.ReasonCode}} {
		if c.value == "" {
			continue
		}
		if f.Mode != ModeFail {
			return &ValidationError{Field: c.field, Reason: "only mode fail answers with codes"}
		}
		if !statusCode.MatchString(c.value) {
			return &ValidationError{Field: c.field, Reason: fmt.Sprintf("%q is not a dotted code such as 8.2.5", c.value)}
		}
	}
	if f.Message != "" && f.Mode != ModeFail {
		return &ValidationError{Field: "message", Reason: "only mode fail answers with a message"}
	}
	if len(f.Message) > maxText {
		return &ValidationError{Field: "message", Reason: fmt.Sprintf("longer than %d bytes", maxText)}
	}
	if f.Hang != 0 && f.Mode != ModeHang {
		return &ValidationError{Field: "hang", Reason: "only mode hang hangs"}
	}
	if f.Hang < 0 || f.Hang > maxHang {
		return &ValidationError{Field: "hang", Reason: fmt.Sprintf("must be from 0 (the default, %s) to %s", DefaultFaultHang, maxHang)}
	}
	switch f.Mode {
	case ModeFail:
		f.SubjectCode = cmp(f.SubjectCode, DefaultFaultSubject)
		f.ReasonCode = cmp(f.ReasonCode, DefaultFaultReason)
		f.Message = cmp(f.Message, DefaultFaultMessage)
	case ModeHang:
		if f.Hang == 0 {
			f.Hang = DefaultFaultHang
		}
	}
	return nil
}

func cmp(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// SetVendor sets the vendor style of v.ProfileType's answers; a Vendor
// with every setting off removes it.
func (s *Sim) SetVendor(v Vendor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch _, ok := s.byType[v.ProfileType]; {
	case v.ProfileType == "":
		return &ValidationError{Field: "profileType", Reason: "required"}
	case !ok:
		return &ValidationError{Field: "profileType", Reason: fmt.Sprintf("%q is not a configured profile type", clip(v.ProfileType))}
	}
	if v == (Vendor{ProfileType: v.ProfileType}) {
		delete(s.vendors, v.ProfileType)
		return nil
	}
	s.vendors[v.ProfileType] = v
	return nil
}

// ClearFaults removes every fault.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// State returns a copy of the Sim's state.
func (s *Sim) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := State{SMDPAddress: s.cfg.SMDPAddress, Pools: []PoolState{}, Profiles: []Profile{}, Faults: []Fault{}, Vendors: []Vendor{}, Calls: map[string]map[string]int{}}
	for _, p := range s.pools {
		st.Pools = append(st.Pools, PoolState{
			ProfileType: p.profileType,
			Available:   p.counts[StateAvailable],
			Allocated:   p.counts[StateAllocated],
			Confirmed:   p.counts[StateConfirmed],
			Released:    p.counts[StateReleased],
			Installed:   p.counts[StateInstalled],
			Unavailable: p.counts[StateUnavailable],
			Cancelled:   p.cancelled,
		})
	}
	for _, p := range s.touched {
		st.Profiles = append(st.Profiles, Profile{
			ICCID: p.iccid, ProfileType: p.pool.profileType, State: p.state,
			MatchingID: p.matchingID, EID: p.eid, History: slices.Clone(p.history),
		})
	}
	slices.SortFunc(st.Profiles, func(a, b Profile) int { return strings.Compare(a.ICCID, b.ICCID) })
	for _, f := range s.faults {
		st.Faults = append(st.Faults, *f)
	}
	for _, v := range s.vendors {
		st.Vendors = append(st.Vendors, v)
	}
	slices.SortFunc(st.Vendors, func(a, b Vendor) int { return strings.Compare(a.ProfileType, b.ProfileType) })
	for fn, outcomes := range s.calls {
		st.Calls[fn] = map[string]int{}
		for o, n := range outcomes {
			st.Calls[fn][o] = n
		}
	}
	s.devicesAndBundles(&st)
	return st
}

// DownloadOrder allocates an Available profile of req.ProfileType, or the
// profile req.ICCID, and returns its ICCID.
func (s *Sim) DownloadOrder(ctx context.Context, req DownloadOrderRequest) (DownloadOrderResult, error) {
	req.ICCID = unpad(req.ICCID)
	body := req
	body.Header = Header{}
	res, err := s.call(ctx, FunctionDownloadOrder, req.Header, body, func() (string, func() (any, error)) {
		faultType := req.ProfileType
		var target *profile
		if req.ICCID != "" {
			if target = s.find(req.ICCID); target != nil {
				faultType = target.pool.profileType
			}
		}
		return faultType, func() (any, error) {
			if req.ProfileType == "" && req.ICCID == "" {
				return nil, failed(SubjectFunction, ReasonMissing, "profileType", "profileType or iccid is required")
			}
			pl := s.byType[req.ProfileType]
			if req.ProfileType != "" && pl == nil {
				return nil, failed(SubjectProfileType, ReasonUnknown, req.ProfileType, "unknown profile type")
			}
			if req.ICCID != "" {
				switch {
				case target == nil:
					return nil, failed(SubjectICCID, ReasonUnknown, req.ICCID, "unknown ICCID")
				case pl != nil && target.pool != pl:
					return nil, failed(SubjectICCID, ReasonNotAllowed, req.ICCID, "profile is of type %s, not %s", target.pool.profileType, req.ProfileType)
				case target.state != StateAvailable:
					return nil, failed(SubjectICCID, ReasonNotAllowed, req.ICCID, "profile is %s, not Available", target.state)
				}
			} else if target = s.takeAvailable(pl); target == nil {
				return nil, failed(SubjectProfileType, ReasonNotAllowed, req.ProfileType, "no Available profile of this type")
			}
			s.touch(target)
			target.matchingID, target.eid = "", req.EID
			s.set(target, StateAllocated)
			target.history = append(target.history, EventAllocated)
			v := s.vendors[target.pool.profileType]
			out := DownloadOrderResult{ICCID: target.iccid, Warning: v.warning()}
			if v.PaddedICCIDs {
				out.ICCID += "F"
			}
			return out, nil
		}
	})
	r, _ := res.(DownloadOrderResult)
	return r, err
}

// ConfirmOrder confirms an Allocated profile and, with ReleaseFlag,
// releases it. A matchingId is made when none is given. An EID other
// than the one the profile is bound to (by downloadOrder) is refused
// with Invalid Association rather than taken.
func (s *Sim) ConfirmOrder(ctx context.Context, req ConfirmOrderRequest) (ConfirmOrderResult, error) {
	req.ICCID = unpad(req.ICCID)
	body := req
	body.Header = Header{}
	res, err := s.call(ctx, FunctionConfirmOrder, req.Header, body, func() (string, func() (any, error)) {
		p := s.find(req.ICCID)
		return typeOf(p), func() (any, error) {
			switch {
			case req.ICCID == "":
				return nil, failed(SubjectFunction, ReasonMissing, "iccid", "iccid is required")
			case req.ReleaseFlag == nil:
				return nil, failed(SubjectFunction, ReasonMissing, "releaseFlag", "releaseFlag is required")
			case p == nil:
				return nil, failed(SubjectICCID, ReasonUnknown, req.ICCID, "unknown ICCID")
			case p.state != StateAllocated:
				return nil, failed(SubjectICCID, ReasonNotAllowed, req.ICCID, "profile is %s, not Allocated", p.state)
			case req.EID != "" && p.eid != "" && req.EID != p.eid:
				return nil, failed(SubjectEID, ReasonInvalidAssociation, req.EID, "the profile is bound to another EID")
			}
			if owner, ok := s.matching[req.MatchingID]; req.MatchingID != "" && ok && owner != p.iccid {
				return nil, failed(SubjectMatchingID, ReasonAlreadyInUse, req.MatchingID, "matchingId is used by another profile")
			}
			mid := req.MatchingID
			for mid == "" {
				mid = newMatchingID()
				if _, used := s.matching[mid]; used {
					mid = ""
				}
			}
			s.matching[mid] = p.iccid
			p.matchingID = mid
			if req.EID != "" {
				p.eid = req.EID
			}
			// One event per call: a release is a confirmation too.
			if *req.ReleaseFlag {
				s.set(p, StateReleased)
				p.history = append(p.history, EventReleased)
			} else {
				s.set(p, StateConfirmed)
				p.history = append(p.history, EventConfirmed)
			}
			v := s.vendors[p.pool.profileType]
			out := ConfirmOrderResult{EID: p.eid, MatchingID: mid, SMDPAddress: s.cfg.SMDPAddress, Warning: v.warning()}
			if v.OmitSMDPAddress {
				out.SMDPAddress = ""
			}
			return out, nil
		}
	})
	r, _ := res.(ConfirmOrderResult)
	return r, err
}

// CancelOrder gives back an Allocated, Confirmed or Released profile,
// which becomes Available again or Unavailable for good. An EID or
// matchingId other than the profile's is refused with Invalid
// Association.
func (s *Sim) CancelOrder(ctx context.Context, req CancelOrderRequest) (Result, error) {
	req.ICCID = unpad(req.ICCID)
	body := req
	body.Header = Header{}
	res, err := s.call(ctx, FunctionCancelOrder, req.Header, body, func() (string, func() (any, error)) {
		p := s.find(req.ICCID)
		return typeOf(p), func() (any, error) {
			switch {
			case req.ICCID == "":
				return nil, failed(SubjectFunction, ReasonMissing, "iccid", "iccid is required")
			case req.FinalProfileStatusIndicator == "":
				return nil, failed(SubjectFunction, ReasonMissing, "finalProfileStatusIndicator", "finalProfileStatusIndicator is required")
			case req.FinalProfileStatusIndicator != FinalAvailable && req.FinalProfileStatusIndicator != FinalUnavailable:
				return nil, failed(SubjectFunction, ReasonInvalid, "finalProfileStatusIndicator", "finalProfileStatusIndicator %q is not Available or Unavailable", clip(req.FinalProfileStatusIndicator))
			case p == nil:
				return nil, failed(SubjectICCID, ReasonUnknown, req.ICCID, "unknown ICCID")
			case p.state == StateAvailable || p.state == StateUnavailable:
				return nil, failed(SubjectICCID, ReasonNotAllowed, req.ICCID, "profile is %s: no order to cancel", p.state)
			case p.state == StateInstalled:
				// Downloaded: the profile is on a device, past the
				// point where an order can be cancelled.
				return nil, failed(SubjectICCID, ReasonNotAllowed, req.ICCID, "profile is %s on a device: too late to cancel", p.state)
			case req.EID != "" && req.EID != p.eid:
				return nil, failed(SubjectEID, ReasonInvalidAssociation, req.EID, "the profile is not bound to this EID")
			case req.MatchingID != "" && req.MatchingID != p.matchingID:
				return nil, failed(SubjectMatchingID, ReasonInvalidAssociation, req.MatchingID, "the profile is not bound to this matchingId")
			}
			if s.matching[p.matchingID] == p.iccid {
				delete(s.matching, p.matchingID) // free for another order; the profile keeps it for State
			}
			p.pool.cancelled++
			p.history = append(p.history, EventCancelled)
			if req.FinalProfileStatusIndicator == FinalAvailable {
				s.set(p, StateAvailable)
				p.pool.returned = append(p.pool.returned, p.serial)
			} else {
				s.set(p, StateUnavailable)
			}
			return Result{Warning: s.vendors[p.pool.profileType].warning()}, nil
		}
	})
	r, _ := res.(Result)
	return r, err
}

// ReleaseProfile releases a Confirmed profile for download.
func (s *Sim) ReleaseProfile(ctx context.Context, req ReleaseProfileRequest) (Result, error) {
	req.ICCID = unpad(req.ICCID)
	body := req
	body.Header = Header{}
	res, err := s.call(ctx, FunctionReleaseProfile, req.Header, body, func() (string, func() (any, error)) {
		p := s.find(req.ICCID)
		return typeOf(p), func() (any, error) {
			switch {
			case req.ICCID == "":
				return nil, failed(SubjectFunction, ReasonMissing, "iccid", "iccid is required")
			case p == nil:
				return nil, failed(SubjectICCID, ReasonUnknown, req.ICCID, "unknown ICCID")
			case p.state != StateConfirmed:
				return nil, failed(SubjectICCID, ReasonNotAllowed, req.ICCID, "profile is %s, not Confirmed", p.state)
			}
			s.set(p, StateReleased)
			p.history = append(p.history, EventReleased)
			return Result{Warning: s.vendors[p.pool.profileType].warning()}, nil
		}
	})
	r, _ := res.(Result)
	return r, err
}

// unpad drops the F a 19-digit ICCID is padded with to 20 characters.
func unpad(iccid string) string {
	if len(iccid) == 20 && (iccid[19] == 'F' || iccid[19] == 'f') {
		return iccid[:19]
	}
	return iccid
}

func typeOf(p *profile) string {
	if p == nil {
		return ""
	}
	return p.pool.profileType
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// call runs one ES2+ function: prepare, under the lock, finds the
// profile type a fault would match and returns the function's body. A
// fault of mode fail, hang or garbage replaces the body. Otherwise the
// body runs once per header (see Header), and a fault of mode lose then
// loses its answer. Hangs wait outside the lock.
func (s *Sim) call(ctx context.Context, function string, h Header, request any, prepare func() (faultType string, exec func() (any, error))) (any, error) {
	s.mu.Lock()
	faultType, exec := prepare()
	f := s.takeFault(function, faultType)
	var (
		res     any
		err     error
		outcome string
	)
	if f != nil && f.Mode != ModeLose {
		err = injected(f)
		outcome = Outcome(err)
	} else {
		var replayed bool
		res, replayed, err = s.once(function, h, request, exec)
		outcome = Outcome(err)
		if replayed {
			outcome = OutcomeReplayed
		}
		if f != nil {
			res, err, outcome = nil, ErrLost, OutcomeFaultLose
		}
	}
	s.count(function, outcome)
	s.mu.Unlock()

	if errors.Is(err, ErrHang) {
		t := time.NewTimer(f.Hang)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		case <-s.closed:
		}
	}
	return res, err
}

// once executes a call and remembers it by its header, or answers again
// what the call under that header answered (replayed). A header already
// used for another request of the function is refused: it names another
// call, and answering the first one's result would be a lie.
func (s *Sim) once(function string, h Header, request any, exec func() (any, error)) (res any, replayed bool, err error) {
	if h.FunctionRequesterIdentifier == "" || h.FunctionCallIdentifier == "" {
		res, err = exec()
		return res, false, err
	}
	key := callKey{requester: h.FunctionRequesterIdentifier, function: function, callID: h.FunctionCallIdentifier}
	data, err := json.Marshal(request)
	if err != nil {
		panic(err) // requests are structs of strings and a *bool
	}
	if c, ok := s.executed[key]; ok {
		if c.request != string(data) {
			return nil, false, failed(SubjectFunction, ReasonAlreadyInUse, "functionCallIdentifier",
				"functionCallIdentifier %s was used for another %s request", clip(h.FunctionCallIdentifier), function)
		}
		return c.result, true, c.err
	}
	res, err = exec()
	if len(s.ring) < MaxRemembered {
		s.ring = append(s.ring, key)
	} else {
		delete(s.executed, s.ring[s.next])
		s.ring[s.next] = key
		s.next = (s.next + 1) % MaxRemembered
	}
	s.executed[key] = executedCall{request: string(data), result: res, err: err}
	return res, false, err
}

func injected(f *Fault) error {
	switch f.Mode {
	case ModeFail:
		return &FunctionError{SubjectCode: f.SubjectCode, ReasonCode: f.ReasonCode, SubjectIdentifier: f.ID, Message: f.Message, injected: true}
	case ModeHang:
		return ErrHang
	default:
		return ErrGarbage
	}
}

// takeFault returns a copy of the fault that applies to this call, if
// any, and spends it. Every matching fault still skipping counts the call
// as one of those it lets through; the first one done skipping applies.
func (s *Sim) takeFault(function, profileType string) *Fault {
	for i, f := range s.faults {
		if f.Function != function || (f.ProfileType != "" && f.ProfileType != profileType) {
			continue
		}
		if f.SkipCount > 0 {
			f.SkipCount--
			continue
		}
		applied := *f
		if f.Count > 0 {
			f.Remaining--
			if f.Remaining == 0 {
				s.faults = slices.Delete(s.faults, i, i+1)
			}
		}
		return &applied
	}
	return nil
}

func (s *Sim) count(function, outcome string) {
	if s.calls[function] == nil {
		s.calls[function] = map[string]int{}
	}
	s.calls[function][outcome]++
}

// find returns the profile iccid names, touched or not; nil for an ICCID
// the Sim never issued. An untouched profile is not recorded until touch.
func (s *Sim) find(iccid string) *profile {
	if p := s.touched[iccid]; p != nil {
		return p
	}
	pl, serial, ok := s.parse(iccid)
	if !ok {
		return nil
	}
	state := StateAvailable
	if pl.drained && serial >= pl.next {
		state = StateUnavailable
	}
	return &profile{iccid: iccid, pool: pl, serial: serial, state: state}
}

func (s *Sim) touch(p *profile) {
	s.touched[p.iccid] = p
}

// takeAvailable finds an Available profile of pl: a never-used one first,
// then one given back.
func (s *Sim) takeAvailable(pl *pool) *profile {
	for !pl.drained && pl.next < pl.count {
		serial := pl.next
		pl.next++
		if p := s.find(s.iccidOf(pl.index, serial)); p.state == StateAvailable {
			return p
		}
	}
	for len(pl.returned) > 0 {
		serial := pl.returned[0]
		pl.returned = pl.returned[1:]
		if p := s.touched[s.iccidOf(pl.index, serial)]; p != nil && p.state == StateAvailable {
			return p
		}
	}
	return nil
}

func (s *Sim) set(p *profile, to ProfileState) {
	p.pool.counts[p.state]--
	p.pool.counts[to]++
	p.state = to
}

// ICCIDs are 89 (telecom) 88 (this simulator), the pool's index in two
// digits, a 12-digit serial and the Luhn check digit: 19 digits, distinct
// across pools.
const iccidPrefix = "8988"

// iccidOf is 8988, the pool's index, the generation and the serial, each
// in a fixed width, and the Luhn digit: 19 digits.
func (s *Sim) iccidOf(pool, serial int) string {
	body := fmt.Sprintf("%s%02d%06d%06d", iccidPrefix, pool, s.generation, serial)
	return body + strconv.Itoa(luhnDigit(body))
}

// newGeneration draws the ICCID block of a start or reset at random: a
// restarted simulator must not issue again the ICCIDs of its earlier life,
// which a platform's database keeps (as no real SM-DP+ would).
func newGeneration() int {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return int(n.Int64())
}

func (s *Sim) parse(iccid string) (*pool, int, bool) {
	if len(iccid) != 19 || !strings.HasPrefix(iccid, iccidPrefix) || !ValidICCID(iccid) {
		return nil, 0, false
	}
	idx, err1 := strconv.Atoi(iccid[4:6])
	gen, err2 := strconv.Atoi(iccid[6:12])
	serial, err3 := strconv.Atoi(iccid[12:18])
	if err1 != nil || err2 != nil || err3 != nil || gen != s.generation || idx >= len(s.pools) || serial >= s.pools[idx].count {
		return nil, 0, false
	}
	return s.pools[idx], serial, true
}

// luhnDigit is the check digit that makes body followed by it pass Luhn.
func luhnDigit(body string) int {
	sum := 0
	for i := 0; i < len(body); i++ {
		d := int(body[len(body)-1-i] - '0')
		if i%2 == 0 { // doubled: it is second from the right once the check digit follows
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return (10 - sum%10) % 10
}

// ValidICCID reports whether s is 19 digits starting 89 with a valid Luhn
// check digit.
func ValidICCID(s string) bool {
	if len(s) != 19 || !strings.HasPrefix(s, "89") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return luhnDigit(s[:18]) == int(s[18]-'0')
}

const matchingIDAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// newMatchingID makes a matchingId of 25 characters in five dashed groups:
// unguessable, since with the SM-DP+ address it is all a device needs to
// download the profile.
func newMatchingID() string {
	var b strings.Builder
	n := big.NewInt(int64(len(matchingIDAlphabet)))
	for i := range 25 {
		if i > 0 && i%5 == 0 {
			b.WriteByte('-')
		}
		k, err := rand.Int(rand.Reader, n)
		if err != nil {
			panic(err) // crypto/rand does not fail on supported platforms
		}
		b.WriteByte(matchingIDAlphabet[k.Int64()])
	}
	return b.String()
}
