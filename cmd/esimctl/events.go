package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/esimplatform/esim/proto/limits"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
)

// eventTypes are the events the webhook service delivers, as --event and
// the public API spell them.
var eventTypes = limits.EventTypes

// eventView is a webhook event in --json output, shaped as the public API's
// (GET /v1/events) with the scope an operator needs besides.
type eventView struct {
	ID string `json:"id"`
	// One of limits.EventTypes: order.*, esim.*, topup.* or ping.
	Event       string `json:"event"`
	AccountID   string `json:"account_id"`
	Environment string `json:"environment"`
	// The order the event is about (the eSIM's order for esim.* and
	// topup.*); null for ping.
	OrderID *string `json:"order_id"`
	// pending, delivered, failed or no_endpoint.
	Status string `json:"status"`
	// null with no_endpoint: nothing was sent.
	URL       *string `json:"url"`
	CreatedAt *string `json:"created_at"`
	// Oldest first, at most limits.MaxWebhookAttempts (3).
	Attempts []attemptView `json:"attempts"`
}

type attemptView struct {
	Number     int32   `json:"number"`
	StartedAt  *string `json:"started_at"`
	DurationMS int64   `json:"duration_ms"`
	// null when no answer came (refused, timed out, cut off).
	StatusCode *int32 `json:"status_code"`
	// null when the attempt succeeded.
	Error *string `json:"error"`
}

// eventDetailView is an event as events get shows it: also what every
// attempt sent and the start of each answer, too much for a list.
type eventDetailView struct {
	eventView
	// The JSON body every attempt sends, as JSON.
	Payload  json.RawMessage     `json:"payload"`
	Attempts []attemptDetailView `json:"attempts"`
}

type attemptDetailView struct {
	attemptView
	// The first 1 KiB of the answer's body.
	ResponseBody string `json:"response_body"`
}

func viewEvent(e *webhookv1.Event) eventView {
	v := eventView{
		ID: e.GetId(), Event: e.GetType(), AccountID: e.GetScope().GetAccountId(), Environment: e.GetScope().GetEnvironment().ShortName(),
		OrderID: orNull(e.GetOrderId()), Status: deliveryStatus(e.GetStatus()), URL: orNull(e.GetUrl()), CreatedAt: timestamp(e.GetCreatedAt()),
		Attempts: make([]attemptView, 0, len(e.GetAttempts())),
	}
	for _, a := range e.GetAttempts() {
		v.Attempts = append(v.Attempts, viewAttempt(a))
	}
	return v
}

func viewAttempt(a *webhookv1.Attempt) attemptView {
	v := attemptView{Number: a.GetNumber(), StartedAt: timestamp(a.GetStartedAt()), DurationMS: a.GetDurationMs(), Error: orNull(a.GetError())}
	if code := a.GetStatusCode(); code != 0 {
		v.StatusCode = &code
	}
	return v
}

func viewEventDetail(e *webhookv1.Event) eventDetailView {
	v := eventDetailView{eventView: viewEvent(e), Payload: jsonOrString(e.GetPayload()), Attempts: make([]attemptDetailView, 0, len(e.GetAttempts()))}
	for _, a := range e.GetAttempts() {
		v.Attempts = append(v.Attempts, attemptDetailView{attemptView: viewAttempt(a), ResponseBody: a.GetResponseBody()})
	}
	return v
}

// jsonOrString keeps a payload JSON in --json output, so jq reads into it;
// anything else (none yet) stays a string rather than breaking the output.
func jsonOrString(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	quoted, _ := json.Marshal(s)
	return quoted
}

// deliveryStatus names a delivery status as the public API does: pending,
// delivered, failed or no_endpoint.
func deliveryStatus(s webhookv1.DeliveryStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "DELIVERY_STATUS_"))
}

// parseDeliveryStatus reads --status before any call.
func parseDeliveryStatus(s string) (webhookv1.DeliveryStatus, error) {
	for _, st := range []webhookv1.DeliveryStatus{
		webhookv1.DeliveryStatus_DELIVERY_STATUS_PENDING, webhookv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED,
		webhookv1.DeliveryStatus_DELIVERY_STATUS_FAILED, webhookv1.DeliveryStatus_DELIVERY_STATUS_NO_ENDPOINT,
	} {
		if strings.TrimSpace(strings.ToLower(s)) == deliveryStatus(st) {
			return st, nil
		}
	}
	return 0, usagef("invalid --status %q: want pending, delivered, failed or no_endpoint", s)
}

// parseEventType reads --type before any call; flag is how it was given.
func parseEventType(flag, s string) (string, error) {
	for _, t := range eventTypes {
		if strings.TrimSpace(strings.ToLower(s)) == t {
			return t, nil
		}
	}
	return "", usagef("invalid %s %q: want %s", flag, s, orList(eventTypes))
}

var eventID = regexp.MustCompile(`^evt_[0-9a-f]{32}$`)

// parseEventID checks an event id before any call, as parseID does a
// UUID: a malformed one is a usage error, not an unknown event. The
// service prints ids in lower case; so does esimctl.
func parseEventID(name, s string) (string, error) {
	id := strings.ToLower(s)
	if !eventID.MatchString(id) {
		return "", usagef("invalid %s %q: want evt_ and 32 hex digits, as events list shows them", name, s)
	}
	return id, nil
}

// attemptOutcome words how one attempt ended: "200", "500", "200: ..."
// when an answer came but not whole, or the error alone when none came.
func attemptOutcome(a *webhookv1.Attempt) string {
	switch code, msg := a.GetStatusCode(), a.GetError(); {
	// The service records a plain non-2xx answer as "status 500": the
	// code says it already.
	case code != 0 && msg != "" && msg != "status "+strconv.Itoa(int(code)):
		return fmt.Sprintf("%d: %s", code, msg)
	case code != 0:
		return fmt.Sprint(code)
	case msg != "":
		return msg
	}
	return "no answer"
}

// oneLine fits text from outside (a receiver's answer, a transport error)
// in one table cell: whitespace and control characters become single
// spaces, which tabwriter cannot misalign, and it is cut at max runes.
func oneLine(s string, max int) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

func (c *cli) eventsCommand() *cobra.Command {
	return group("events", "List and inspect webhook events and their delivery attempts", "webhook",
		c.eventsListCommand(), c.eventsGetCommand())
}

func (c *cli) eventsListCommand() *cobra.Command {
	var account, env, eventType, oldEventType, order, status string
	var page, limit int32
	cmd := &cobra.Command{
		Use:   "list [--account ID --env sandbox|live] [--type TYPE] [--order ID] [--status pending|delivered|failed|no_endpoint] [--page N] [--limit N]",
		Short: "List webhook events and how their delivery went, newest first",
		Long: fmt.Sprintf(`List webhook events, newest first, each with its delivery status and
attempts: what to open when a partner says a webhook never came. --account
and --env go together; without them, every account's events are listed.

A delivery is pending (an attempt is due or running), delivered (an attempt
got a 2xx answer), failed (%d attempts failed; it is never sent again) or
no_endpoint (no URL was set when the event happened; nothing was sent). A
page holds %d events unless --limit says otherwise; esimctl events get shows
an event's payload and each attempt's answer.

--type was --event before --event named an event id, as it does in events
get: --event TYPE still works here.`, limits.MaxWebhookAttempts, limits.DefaultPageLimit),
		Example: `  esimctl events list --account 0193... --env live --status failed
  esimctl events list --order 0193... --json
  esimctl events list --account 0193... --env sandbox --type ping --limit 5`,
		Args: exactArgs(),
	}
	cmd.Flags().StringVar(&account, "account", "", "only the events of the account with this `ID` (with --env)")
	cmd.Flags().StringVar(&env, "env", "", "only the events of this environment, sandbox or live (with --account)")
	cmd.Flags().StringVar(&eventType, "type", "", "only events of this type: "+orList(eventTypes))
	// What --type was called before --event meant an event id everywhere.
	cmd.Flags().StringVar(&oldEventType, "event", "", "the former name of --type")
	_ = cmd.Flags().MarkHidden("event")
	cmd.Flags().StringVar(&order, "order", "", "only the events of the order with this `ID` (an eSIM's and its top-ups' are its order's)")
	cmd.Flags().StringVar(&status, "status", "", "only events in this delivery status: pending, delivered, failed or no_endpoint")
	addPaging(cmd, &page, &limit, limits.DefaultPageLimit)
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		req := &webhookv1.ListEventsRequest{Page: page, Limit: limit}
		// A scope is an account in an environment: half of one would
		// list every account's events while looking like a filter.
		switch accountSet, envSet := cmd.Flags().Changed("account"), cmd.Flags().Changed("env"); {
		case accountSet && envSet:
			scope, err := parseWebhookScope(account, env)
			if err != nil {
				return err
			}
			req.Scope = scope
		case accountSet:
			return usagef("--account needs --env (sandbox or live): an account's events are listed one environment at a time")
		case envSet:
			return usagef("--env needs --account: without both, every account's events are listed")
		}
		// An empty filter is refused, not dropped: `--event "$E"` with E
		// unset would otherwise list every event as if all were of E.
		var err error
		switch typeSet, oldSet := cmd.Flags().Changed("type"), cmd.Flags().Changed("event"); {
		case typeSet && oldSet:
			return usagef("--event is the former name of --type: give --type alone")
		case typeSet:
			if req.Type, err = parseEventType("--type", eventType); err != nil {
				return err
			}
		case oldSet:
			if req.Type, err = parseEventType("--event", oldEventType); err != nil {
				return err
			}
		}
		if cmd.Flags().Changed("order") {
			if req.OrderId, err = parseID("--order", order); err != nil {
				return err
			}
		}
		if cmd.Flags().Changed("status") {
			if req.Status, err = parseDeliveryStatus(status); err != nil {
				return err
			}
		}
		if err := checkPaging(page, limit); err != nil {
			return err
		}
		if req.Scope != nil {
			if _, err := c.requireAccount(ctx, req.Scope.GetAccountId()); err != nil {
				return err
			}
		}
		resp, err := c.webhook().ListEvents(ctx, req)
		if err != nil {
			what := "list webhook events"
			if req.Scope != nil {
				what = fmt.Sprintf("list %s webhook events of account %s", req.Scope.GetEnvironment().ShortName(), req.Scope.GetAccountId())
			}
			return c.callFailed(what, "webhook", err)
		}
		// Pagination counts in int32, as every other list; no page
		// count comes near it.
		total := int32(min(resp.GetTotal(), math.MaxInt32))
		if c.json {
			views := make([]eventView, 0, len(resp.GetEvents()))
			for _, e := range resp.GetEvents() {
				views = append(views, viewEvent(e))
			}
			return c.printJSON(views, newPagination(page, limit, total))
		}
		if total == 0 && len(resp.GetEvents()) == 0 && req.Type == "" && req.OrderId == "" && req.Status == 0 {
			if req.Scope != nil {
				fmt.Fprintf(c.stdout, "account %s has no %s webhook events\n", req.Scope.GetAccountId(), req.Scope.GetEnvironment().ShortName())
			} else {
				fmt.Fprintln(c.stdout, "no webhook events")
			}
			return nil
		}
		rows := make([][]any, 0, len(resp.GetEvents()))
		for _, e := range resp.GetEvents() {
			last := "-"
			if n := len(e.GetAttempts()); n > 0 {
				last = oneLine(attemptOutcome(e.GetAttempts()[n-1]), 60)
			}
			rows = append(rows, []any{e.GetId(), e.GetType(), deliveryStatus(e.GetStatus()), orDash(e.GetOrderId()),
				len(e.GetAttempts()), last, textTime(e.GetCreatedAt())})
		}
		return c.printList(page, limit, total, "events",
			[]any{"ID", "TYPE", "STATUS", "ORDER", "ATTEMPTS", "LAST ANSWER", "CREATED"}, rows)
	})
	return cmd
}

func (c *cli) eventsGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get --event ID",
		Short: "Show one webhook event, of any account, with its payload and every attempt",
		Long: `Show one webhook event, of any account and environment: where it was sent,
its delivery status, every attempt (when, how long, the status code or the
error, and the start of the receiver's answer) and the payload every
attempt sends.`,
		Example: `  esimctl events get --event evt_0f6c1e...
  esimctl events get evt_0f6c1e... --json | jq .data.payload`,
	}
	event := addIDFlag(cmd, "event", "EVENT_ID", "the event's")
	cmd.Args = idArgs(event)
	cmd.RunE = c.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
		raw, name, err := event.get(cmd, args)
		if err != nil {
			return err
		}
		id, err := parseEventID(name, raw)
		if err != nil {
			return err
		}
		// No scope: an operator reads any account's events.
		e, err := c.webhook().GetEvent(ctx, &webhookv1.GetEventRequest{Id: id})
		if isNotFound(err) {
			// The service's own words name the event again ("event E:
			// not found").
			return &failure{msg: fmt.Sprintf("get event %s: not found; `esimctl events list` shows the events there are", id)}
		}
		if err != nil {
			return c.callFailed("get event "+id, "webhook", err)
		}
		if c.json {
			return c.printJSON(viewEventDetail(e), nil)
		}
		return c.printEvent(e)
	})
	return cmd
}

// printEvent writes an event for a human: its fields, its attempts, then
// its payload.
func (c *cli) printEvent(e *webhookv1.Event) error {
	tw := table(c.stdout)
	row(tw, "id:", e.GetId())
	row(tw, "event:", e.GetType())
	row(tw, "account:", e.GetScope().GetAccountId())
	row(tw, "environment:", e.GetScope().GetEnvironment().ShortName())
	row(tw, "order:", orDash(e.GetOrderId()))
	row(tw, "status:", deliveryStatus(e.GetStatus()))
	row(tw, "url:", orDash(e.GetUrl()))
	row(tw, "created:", textTime(e.GetCreatedAt()))
	row(tw, "attempts:", len(e.GetAttempts()))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(e.GetAttempts()) > 0 {
		fmt.Fprintln(c.stdout)
		if err := c.printAttempts(e.GetAttempts(), true); err != nil {
			return err
		}
	}
	fmt.Fprintln(c.stdout, "\npayload:")
	var indented bytes.Buffer
	if err := json.Indent(&indented, []byte(e.GetPayload()), "", "  "); err != nil {
		fmt.Fprintln(c.stdout, e.GetPayload())
		return nil
	}
	fmt.Fprintln(c.stdout, indented.String())
	return nil
}

// printAttempts writes attempts as a table; withResponse adds the start
// of each answer, on one line.
func (c *cli) printAttempts(attempts []*webhookv1.Attempt, withResponse bool) error {
	header := []any{"#", "STARTED", "DURATION", "STATUS", "ERROR"}
	if withResponse {
		header = append(header, "RESPONSE")
	}
	tw := table(c.stdout, header...)
	for _, a := range attempts {
		code := "-"
		if a.GetStatusCode() != 0 {
			code = fmt.Sprint(a.GetStatusCode())
		}
		cells := []any{a.GetNumber(), textTime(a.GetStartedAt()), fmt.Sprintf("%d ms", a.GetDurationMs()), code, orDash(oneLine(a.GetError(), 80))}
		if withResponse {
			cells = append(cells, orDash(oneLine(a.GetResponseBody(), 80)))
		}
		row(tw, cells...)
	}
	return tw.Flush()
}
