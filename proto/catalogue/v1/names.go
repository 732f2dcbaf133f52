package cataloguev1

import "strings"

// The short names below are how the public API, esimctl and the services'
// logs spell these enums: the value name without its type prefix, in lower
// case (PLAN_TYPE_PER_DAY is "per_day"). Hand-written; not generated.

// ShortName is "fixed" or "per_day" ("unspecified" for the zero value).
func (t PlanType) ShortName() string { return shortName(t.String(), "PLAN_TYPE_") }

// ShortName is "country", "region" or "global".
func (s CoverageScope) ShortName() string { return shortName(s.String(), "COVERAGE_SCOPE_") }

// ShortName is "active" or "retired".
func (s PlanStatus) ShortName() string { return shortName(s.String(), "PLAN_STATUS_") }

// PlanTypeByShortName parses a short name; ok is false for anything else,
// the zero value's name included.
func PlanTypeByShortName(name string) (t PlanType, ok bool) {
	v, ok := PlanType_value["PLAN_TYPE_"+strings.ToUpper(name)]
	return PlanType(v), ok && v != int32(PlanType_PLAN_TYPE_UNSPECIFIED)
}

func shortName(full, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(full, prefix))
}
