package ordering

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// Search is what a partner looks an order or an eSIM up by: whatever
// they have at hand, in one box.
type Search struct {
	Scope Scope
	// Query is an order's or eSIM's id, the start of an ICCID (spaces,
	// as printed in groups, are ignored), or the start of a customer's
	// reference or email.
	Query string
	// Limit is 1..MaxPageLimit of each kind; 0 means DefaultPageLimit.
	Limit int32
}

// SearchResult is what matched: each list ordered by what matched, and
// More set when either had more than the limit.
type SearchResult struct {
	Orders []Order
	Esims  []Esim
	// TopUps holds the top-up an id names.
	TopUps []TopUp
	More   bool
}

// SearchQuery is a prefix search in one scope. Prefix is matched as
// text, never as a pattern.
type SearchQuery struct {
	Scope  Scope
	Prefix string
	Limit  int32
}

// Search finds orders of eSIMs and eSIMs in the scope. An id finds its
// order, top-up or eSIM; anything else is a prefix of customer references and
// (in any case) emails, and when it is digits, of ICCIDs too.
func (s *Service) Search(ctx context.Context, q Search) (SearchResult, error) {
	if err := validScope(&q.Scope); err != nil {
		return SearchResult{}, err
	}
	text := strings.TrimSpace(q.Query)
	if text == "" {
		return SearchResult{}, invalid("query", "is required")
	}
	if err := validText("query", text, MaxEmailLength); err != nil {
		return SearchResult{}, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultPageLimit
	}
	if limit < 1 || limit > MaxPageLimit {
		return SearchResult{}, invalid("limit", fmt.Sprintf("must be from 1 to %d", MaxPageLimit))
	}
	var res SearchResult
	if id, err := uuid.Parse(text); err == nil && len(text) == 36 {
		o, err := s.store.Order(ctx, &q.Scope, id)
		switch {
		case err == nil && o.Kind == KindEsims:
			s.present(&o)
			res.Orders = append(res.Orders, o)
		case err == nil:
			e, err := s.store.Esim(ctx, &q.Scope, o.EsimID)
			if err != nil {
				return SearchResult{}, fmt.Errorf("search top-up %s: its eSIM: %w", id, err)
			}
			s.present(&o)
			res.TopUps = append(res.TopUps, TopUpOf(o, e.OrderID))
		case !errors.Is(err, ErrNotFound):
			return SearchResult{}, fmt.Errorf("search order %s: %w", id, err)
		}
		e, err := s.store.Esim(ctx, &q.Scope, id)
		switch {
		case err == nil:
			s.presentEsim(&e)
			res.Esims = append(res.Esims, e)
		case !errors.Is(err, ErrNotFound):
			return SearchResult{}, fmt.Errorf("search eSIM %s: %w", id, err)
		}
		return res, nil
	}
	// One more than asked tells whether there are more.
	orders, err := s.store.SearchOrders(ctx, SearchQuery{Scope: q.Scope, Prefix: text, Limit: limit + 1})
	if err != nil {
		return SearchResult{}, fmt.Errorf("search orders: %w", err)
	}
	if len(orders) > int(limit) {
		orders, res.More = orders[:limit], true
	}
	for i := range orders {
		s.present(&orders[i])
	}
	res.Orders = orders
	if digits := strings.Join(strings.Fields(text), ""); len(digits) <= maxICCIDLength &&
		!strings.ContainsFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) {
		esims, err := s.store.SearchEsims(ctx, SearchQuery{Scope: q.Scope, Prefix: digits, Limit: limit + 1})
		if err != nil {
			return SearchResult{}, fmt.Errorf("search eSIMs: %w", err)
		}
		if len(esims) > int(limit) {
			esims, res.More = esims[:limit], true
		}
		for i := range esims {
			s.presentEsim(&esims[i])
		}
		res.Esims = esims
	}
	return res, nil
}
