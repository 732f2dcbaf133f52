package es2plus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/services/ordering"
)

// ReservationState is how far a profile reserved for an order got.
type ReservationState string

// A position is requested before its downloadOrder is sent (the call's
// identifier recorded), reserved once downloadOrder answered its ICCID and
// released once confirmOrder did; a failed order's profiles are due for
// cancelOrder until the SM-DP+ confirms (cancelled) or refuses for good
// (cancel refused, an operator's matter). A requested position, or one due
// for cancellation without an ICCID, lost its downloadOrder's answer: the
// call is sent again under its identifier to learn what it reserved.
const (
	Requested     ReservationState = "requested"
	Reserved      ReservationState = "reserved"
	Released      ReservationState = "released"
	CancelDue     ReservationState = "cancel_due"
	Cancelled     ReservationState = "cancelled"
	CancelRefused ReservationState = "cancel_refused"
)

// Reservation is the profile the SM-DP+ reserved, or was asked to, for
// one position of an order.
type Reservation struct {
	OrderID  uuid.UUID
	Position int32
	// ICCID is "" until downloadOrder's answer is known.
	ICCID string
	State ReservationState
	// CallID and ProfileType are those of the position's downloadOrder.
	CallID      string
	ProfileType string
	// MatchingID and SMDPAddress are set once released.
	MatchingID     string
	SMDPAddress    string
	CancelAttempts int32
	LastError      string
}

// Store records reservations in ordering's database: for an order being
// processed, on its lock's connection (Provider's records).
type Store interface {
	// Reservations returns the order's reservations by position.
	Reservations(ctx context.Context, orderID uuid.UUID) ([]Reservation, error)
	// RequestReservation records a downloadOrder about to be sent.
	RequestReservation(ctx context.Context, orderID uuid.UUID, position int32, profileType, callID string) error
	// AddReservation records the ICCID a requested position's
	// downloadOrder answered.
	AddReservation(ctx context.Context, orderID uuid.UUID, position int32, iccid string) error
	// ForgetRequest drops a requested position whose downloadOrder was
	// refused: it holds nothing.
	ForgetRequest(ctx context.Context, orderID uuid.UUID, position int32) error
	// ReleaseReservation records a reserved profile's release.
	ReleaseReservation(ctx context.Context, orderID uuid.UUID, position int32, matchingID, smdpAddress string) error
	// MarkCancelDue makes every requested, reserved or released profile
	// of the order due for cancellation, but one whose ICCID another eSIM
	// has, and returns them; in the same transaction it has the canceller
	// (a job, working under the order's lock) give back those the caller
	// does not.
	MarkCancelDue(ctx context.Context, orderID uuid.UUID, reason string) ([]Reservation, error)
	// LearnCancelICCID records the ICCID of a cancellation that had none.
	LearnCancelICCID(ctx context.Context, orderID uuid.UUID, position int32, iccid string) error
	// FinishCancellation moves a due cancellation to Cancelled or
	// CancelRefused.
	FinishCancellation(ctx context.Context, orderID uuid.UUID, position int32, state ReservationState, lastError string) error
	// RetryCancellation records a failed attempt of a due cancellation,
	// which stays due.
	RetryCancellation(ctx context.Context, orderID uuid.UUID, position int32, lastError string) error
}

// ProfileTypes maps plans to the SM-DP+'s profile types: provider
// configuration, since which profiles an operator holds for which plan is
// agreed with the SM-DP+, not with the catalogue.
type ProfileTypes struct {
	// Default serves every plan not in ByPlan; "" serves none.
	Default string
	ByPlan  map[uuid.UUID]string
}

var profileTypeName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// ParseProfileTypes reads "*=<type>,<plan uuid>=<type>,...": "*" is the
// default.
func ParseProfileTypes(s string) (ProfileTypes, error) {
	out := ProfileTypes{ByPlan: map[uuid.UUID]string{}}
	if strings.TrimSpace(s) == "" {
		return ProfileTypes{}, errors.New("empty: want *=<profile type>, optionally followed by <plan id>=<profile type> entries")
	}
	for entry := range strings.SplitSeq(s, ",") {
		plan, typ, ok := strings.Cut(strings.TrimSpace(entry), "=")
		plan, typ = strings.TrimSpace(plan), strings.TrimSpace(typ)
		if !ok || !profileTypeName.MatchString(typ) {
			return ProfileTypes{}, fmt.Errorf("entry %q: want <plan id or *>=<profile type of 1 to 64 letters, digits, '.', '_' or '-'>", entry)
		}
		if plan == "*" {
			if out.Default != "" {
				return ProfileTypes{}, errors.New("* is given twice")
			}
			out.Default = typ
			continue
		}
		id, err := uuid.Parse(plan)
		if err != nil {
			return ProfileTypes{}, fmt.Errorf("entry %q: %q is neither * nor a plan id", entry, plan)
		}
		if _, dup := out.ByPlan[id]; dup {
			return ProfileTypes{}, fmt.Errorf("plan %s is given twice", id)
		}
		out.ByPlan[id] = typ
	}
	return out, nil
}

// For returns the profile type of a plan.
func (p ProfileTypes) For(plan uuid.UUID) (string, bool) {
	if t, ok := p.ByPlan[plan]; ok {
		return t, true
	}
	return p.Default, p.Default != ""
}

// partnerMessage is all a partner learns of a live provider failure: the
// SM-DP+'s codes and messages are the operator's (logged), never the
// partner's.
const partnerMessage = "the live provider refused or did not answer"

// Cancellations.
const (
	// maxCancelAttempts is how often a refused cancellation is tried
	// before it is left to an operator: a refusal of a profile the order
	// does hold is the SM-DP+'s passing fault more often than not.
	maxCancelAttempts = 10
)

// Provider implements ordering.Provider over ES2+: for each eSIM of an
// order it records the call it is about to make, reserves a profile of the
// plan's type (downloadOrder) and releases it (confirmOrder with
// releaseFlag), recording each step before the next. A definitive refusal
// or an unknown outcome of any step fails the order and gives back what it
// holds or may hold (cancelOrder, after learning what a lost downloadOrder
// reserved); a crash leaves the records, from which the next Issue of the
// order resumes.
type Provider struct {
	client *Client
	// records are the reservations as the holder of an order's lock
	// writes them, on its connection.
	records  func(tx ordering.Locked) Store
	types    ProfileTypes
	log      *slog.Logger
	settings Settings
}

var (
	_ ordering.Provider = (*Provider)(nil)
	_ ordering.Releaser = (*Provider)(nil)
)

// Settings tune a Provider.
type Settings struct {
	// RetryBackoff is the wait before a cancellation that did not go
	// through is tried again by the canceller (CancelDue).
	RetryBackoff time.Duration
	// CancelBudget bounds the cancellations a failing order makes itself;
	// DefaultCancelBudget when zero.
	CancelBudget time.Duration
	// SMDPAddress is the SM-DP+'s address for activation codes when
	// confirmOrder leaves it out (SGP.22 makes it optional).
	SMDPAddress string
	// ConfirmationCodes are the codes confirmOrder sends, by profile
	// type, for the types that need one.
	ConfirmationCodes map[string]string
}

// DefaultCancelBudget is how long a failing order gives back its profiles
// itself unless configured otherwise.
const DefaultCancelBudget = 5 * time.Second

// NewProvider returns the provider of live orders.
func NewProvider(client *Client, records func(tx ordering.Locked) Store, types ProfileTypes, log *slog.Logger, settings Settings) *Provider {
	if settings.CancelBudget <= 0 {
		settings.CancelBudget = DefaultCancelBudget
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{client: client, records: records, types: types, log: log, settings: settings}
}

// Issue implements ordering.Provider.
func (p *Provider) Issue(ctx context.Context, tx ordering.Locked, req ordering.IssueRequest) ([]ordering.Profile, error) {
	log := p.log.With("order_id", req.OrderID.String())
	store := p.records(tx)
	profileType, ok := p.types.For(req.PlanID)
	if !ok {
		log.Error("live order failed: no SM-DP+ profile type is configured for its plan (SMDP_PROFILE_TYPES)", "plan_id", req.PlanID.String())
		return nil, fmt.Errorf("%w: %s", ordering.ErrProviderFailed, partnerMessage)
	}
	held, err := store.Reservations(ctx, req.OrderID)
	if err != nil {
		return nil, fmt.Errorf("es2plus: reservations of order %s: %w", req.OrderID, err)
	}
	byPosition := make(map[int32]Reservation, len(held))
	for _, r := range held {
		if r.State != Requested && r.State != Reserved && r.State != Released {
			// The order was failed before a crash: the decision stands,
			// and the canceller gives back what it still holds.
			return nil, fmt.Errorf("%w: %s", ordering.ErrProviderFailed, partnerMessage)
		}
		byPosition[r.Position] = r
	}

	profiles := make([]ordering.Profile, req.Quantity)
	for pos := range req.Quantity {
		r, ok := byPosition[pos]
		if !ok {
			// Recorded before the call: whatever happens to its answer,
			// the call can be sent again under its identifier.
			r = Reservation{OrderID: req.OrderID, Position: pos, State: Requested, CallID: uuid.NewString(), ProfileType: profileType}
			if err := store.RequestReservation(ctx, req.OrderID, pos, r.ProfileType, r.CallID); err != nil {
				return nil, fmt.Errorf("es2plus: record the reservation requested for order %s position %d: %w", req.OrderID, pos, err)
			}
		}
		if r.State == Requested {
			// A resumed order sends a lost call again under its
			// identifier, and so gets the profile it reserved.
			iccid, err := p.client.DownloadOrderAs(ctx, r.CallID, DownloadOrderRequest{ProfileType: r.ProfileType})
			if err != nil {
				return nil, p.fail(ctx, store, log, req.OrderID, pos, FunctionDownloadOrder, err)
			}
			if err := store.AddReservation(ctx, req.OrderID, pos, iccid); err != nil {
				// Still requested: the order stays pending, and its next
				// Issue learns the ICCID again.
				return nil, fmt.Errorf("es2plus: record the profile reserved for order %s position %d: %w", req.OrderID, pos, err)
			}
			r.ICCID, r.State = iccid, Reserved
		}
		if r.State == Reserved {
			res, err := p.client.ConfirmOrder(ctx, ConfirmOrderRequest{ICCID: r.ICCID, ReleaseFlag: true, ConfirmationCode: p.settings.ConfirmationCodes[r.ProfileType]})
			if err != nil {
				return nil, p.fail(ctx, store, log, req.OrderID, pos, FunctionConfirmOrder, err)
			}
			if res.SMDPAddress == "" {
				res.SMDPAddress = p.settings.SMDPAddress
			}
			if err := store.ReleaseReservation(ctx, req.OrderID, pos, res.MatchingID, res.SMDPAddress); err != nil {
				return nil, fmt.Errorf("es2plus: record the release of order %s position %d: %w", req.OrderID, pos, err)
			}
			r.MatchingID, r.SMDPAddress = res.MatchingID, res.SMDPAddress
		}
		profiles[pos] = ordering.Profile{ICCID: r.ICCID, MatchingID: r.MatchingID, SMDPAddress: r.SMDPAddress}
	}
	return profiles, nil
}

// fail records the order's failure at the step (function) of position
// pos, gives back the profiles the order holds for up to the cancel
// budget, and returns the definitive failure that has ordering refund it.
// A downloadOrder the SM-DP+ refused reserved nothing, so its position is
// forgotten rather than sent again.
func (p *Provider) fail(ctx context.Context, store Store, log *slog.Logger, orderID uuid.UUID, pos int32, function string, cause error) error {
	log.Warn("live order failed at the SM-DP+; cancelling the profiles it holds",
		"position", pos, "function", function, "outcome", Outcome(cause), "definitive", IsDefinitive(cause), "error", cause.Error())
	if function == FunctionDownloadOrder && IsDefinitive(cause) {
		record, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordBudget)
		err := store.ForgetRequest(record, orderID, pos)
		cancel()
		if err != nil {
			return fmt.Errorf("es2plus: record the refusal of order %s position %d (%v): %w", orderID, pos, cause, err)
		}
	}
	if err := p.giveBack(ctx, store, log, orderID, truncate(cause.Error())); err != nil {
		// Not recorded: the order stays pending and its next Issue
		// resumes it, holding the same profiles.
		return fmt.Errorf("es2plus: record the failure of order %s (%v): %w", orderID, cause, err)
	}
	return fmt.Errorf("%w: %s", ordering.ErrProviderFailed, partnerMessage)
}

// Release implements ordering.Releaser: an order that failed after its
// profiles were issued (ordering found an ICCID another eSIM has) gives
// back every profile it holds but that one.
func (p *Provider) Release(ctx context.Context, tx ordering.Locked, orderID uuid.UUID) error {
	return p.giveBack(ctx, p.records(tx), p.log.With("order_id", orderID.String()), orderID, "the order failed after its profiles were issued")
}

// giveBack marks every profile the order holds or may hold due for
// cancellation and cancels them for up to the cancel budget. It runs on
// contexts of its own: an order that failed by running out of time must
// still give back what it holds, and one whose SM-DP+ hangs must not hold
// its partner's order any longer: what the budget leaves is the
// canceller's, whose job MarkCancelDue inserted and which waits for the
// order's lock, which the caller holds.
func (p *Provider) giveBack(ctx context.Context, store Store, log *slog.Logger, orderID uuid.UUID, reason string) error {
	record, cancelRecord := context.WithTimeout(context.WithoutCancel(ctx), recordBudget)
	defer cancelRecord()
	due, err := store.MarkCancelDue(record, orderID, reason)
	if err != nil {
		return err
	}
	p.cancelWithin(ctx, record, store, log, due, true)
	return nil
}

// cancelWithin cancels the due profiles for up to the cancel budget.
func (p *Provider) cancelWithin(ctx, record context.Context, store Store, log *slog.Logger, due []Reservation, first bool) {
	budget, cancelBudget := context.WithTimeout(context.WithoutCancel(ctx), p.settings.CancelBudget)
	defer cancelBudget()
	for i, r := range due {
		if budget.Err() != nil {
			log.Warn("the cancel budget ran out; the canceller gives back the rest of the order's profiles",
				"left", len(due)-i, "budget", p.settings.CancelBudget.String())
			break
		}
		p.cancel(budget, record, store, log, r, first)
	}
}

// recordBudget bounds the statements that record a failure and its
// cancellations, which run whatever happened to the order's context.
const recordBudget = 5 * time.Second

// cancel gives back one profile due for cancellation within ctx and
// records the outcome on record: cancelled, refused for good, or to be
// tried again. One whose downloadOrder's answer was lost is sent again
// first, under its identifier, to learn what it reserved.
func (p *Provider) cancel(ctx, record context.Context, store Store, log *slog.Logger, r Reservation, first bool) {
	log = log.With("position", r.Position)
	if r.ICCID == "" {
		iccid, err := p.client.DownloadOrderAs(ctx, r.CallID, DownloadOrderRequest{ProfileType: r.ProfileType})
		switch {
		case err == nil:
			if lerr := store.LearnCancelICCID(record, r.OrderID, r.Position, iccid); lerr != nil {
				log.Error("record the ICCID a lost downloadOrder reserved", "iccid", iccid, "error", lerr.Error())
				return
			}
			log.Info("a downloadOrder whose answer was lost reserved a profile; giving it back", "iccid", iccid, "function_call_identifier", r.CallID)
			r.ICCID = iccid
		case IsDefinitive(err):
			// Refused under the same identifier: nothing was reserved.
			if ferr := store.FinishCancellation(record, r.OrderID, r.Position, Cancelled, "the downloadOrder sent again was refused: nothing reserved"); ferr != nil {
				log.Error("record a cancellation", "error", ferr.Error())
			}
			log.Info("a downloadOrder whose answer was lost reserved nothing", "function_call_identifier", r.CallID, "error", err.Error())
			return
		default:
			p.retry(record, store, log, r, err)
			return
		}
	}
	log = log.With("iccid", r.ICCID)
	err := p.client.CancelOrder(ctx, CancelOrderRequest{ICCID: r.ICCID, FinalProfileStatusIndicator: FinalProfileStatusAvailable})
	state, lastError := Cancelled, ""
	switch {
	case err == nil:
	case IsDefinitive(err) && !first && alreadyGone(err):
		// An earlier attempt went through but its answer was lost.
		log.Info("a cancellation tried again found the profile already given back", "error", err.Error())
	case IsDefinitive(err) && r.CancelAttempts+1 >= maxCancelAttempts:
		state, lastError = CancelRefused, truncate(err.Error())
		log.Error("the SM-DP+ keeps refusing to cancel a profile of a failed order; it stays reserved there until an operator frees it",
			"attempts", r.CancelAttempts+1, "error", err.Error())
	default:
		p.retry(record, store, log, r, err)
		return
	}
	if err := store.FinishCancellation(record, r.OrderID, r.Position, state, lastError); err != nil {
		log.Error("record a cancellation", "error", err.Error())
	}
}

// retry leaves a cancellation that did not go through for CancelDue.
func (p *Provider) retry(record context.Context, store Store, log *slog.Logger, r Reservation, err error) {
	if rerr := store.RetryCancellation(record, r.OrderID, r.Position, truncate(err.Error())); rerr != nil {
		log.Error("record a cancellation to try again", "error", rerr.Error())
	}
	log.Warn("cancelling a profile of a failed order did not go through; it will be tried again",
		"retry_in", p.settings.RetryBackoff.String(), "outcome", Outcome(err), "error", err.Error())
}

// alreadyGone reports whether a refusal of a cancellation tried again
// says the profile is not held any more: SGP.22's Profile ICCID subject
// (8.2.1) with 3.7 (not in a state to be cancelled: our earlier attempt
// made it available) or 3.9 (unknown: the SM-DP+ forgot it once given
// back), whichever the vendor answers.
func alreadyGone(err error) bool {
	var fe *FunctionError
	return errors.As(err, &fe) && fe.SubjectCode == "8.2.1" && (fe.ReasonCode == "3.7" || fe.ReasonCode == "3.9")
}

// CancelDue is the canceller's: it tries, for up to the cancel budget,
// the order's cancellations whose earlier attempt ended without an
// answer, or whose order's request died before trying, on tx, the
// holder of the order's lock (so never at once with the order's own
// attempts); it returns how many are still due, to be tried again after
// RetryBackoff.
func (p *Provider) CancelDue(ctx context.Context, tx ordering.Locked, orderID uuid.UUID) (int, error) {
	store := p.records(tx)
	held, err := store.Reservations(ctx, orderID)
	if err != nil {
		return 0, fmt.Errorf("es2plus: reservations of order %s: %w", orderID, err)
	}
	var due []Reservation
	for _, r := range held {
		if r.State == CancelDue {
			due = append(due, r)
		}
	}
	if len(due) == 0 {
		return 0, nil
	}
	record, cancelRecord := context.WithTimeout(context.WithoutCancel(ctx), recordBudget)
	defer cancelRecord()
	p.cancelWithin(ctx, record, store, p.log.With("order_id", orderID.String()), due, false)
	after, err := store.Reservations(record, orderID)
	if err != nil {
		return 0, fmt.Errorf("es2plus: reservations of order %s: %w", orderID, err)
	}
	left := 0
	for _, r := range after {
		if r.State == CancelDue {
			left++
		}
	}
	return left, nil
}

// probeICCID is a well-formed ICCID in the range ITU-T E.118 leaves to
// tests (89 00), which no SM-DP+ issues.
const probeICCID = "8900000000000000003"

var _ ordering.Checker = (*Provider)(nil)

// Describe implements ordering.Checker.
func (p *Provider) Describe() (string, string) { return "es2plus", p.client.base }

// Check implements ordering.Checker. It calls the SM-DP+ harmlessly, cancelOrder of an ICCID it cannot
// hold, to show that the URL, the certificates and the protocol work: any
// ES2+ answer, success or refusal, proves the connection; nil then, with
// what it answered. Transport, TLS and protocol failures are the error.
func (p *Provider) Check(ctx context.Context) (string, error) {
	err := p.client.CancelOrder(ctx, CancelOrderRequest{ICCID: probeICCID, FinalProfileStatusIndicator: FinalProfileStatusAvailable})
	var fe *FunctionError
	switch {
	case err == nil:
		return "cancelOrder of a probe ICCID answered Executed-Success", nil
	case errors.As(err, &fe):
		return fmt.Sprintf("cancelOrder of a probe ICCID answered Failed %s/%s, as expected of an ICCID it does not hold", fe.SubjectCode, fe.ReasonCode), nil
	default:
		return "", err
	}
}

// truncate bounds what an error adds to a row, keeping it valid UTF-8.
func truncate(s string) string {
	const max = 500
	if len(s) <= max {
		return strings.ToValidUTF8(s, "?")
	}
	return strings.ToValidUTF8(s[:max], "")
}
