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
	v, ok := byShortName(PlanType_value, "PLAN_TYPE_", name)
	return PlanType(v), ok
}

// CoverageScopeByShortName parses "country", "region" or "global"; ok is
// false for anything else.
func CoverageScopeByShortName(name string) (s CoverageScope, ok bool) {
	v, ok := byShortName(CoverageScope_value, "COVERAGE_SCOPE_", name)
	return CoverageScope(v), ok
}

// PlanStatusByShortName parses "active" or "retired"; ok is false for
// anything else.
func PlanStatusByShortName(name string) (s PlanStatus, ok bool) {
	v, ok := byShortName(PlanStatus_value, "PLAN_STATUS_", name)
	return PlanStatus(v), ok
}

// Known reports whether t is a value this code's contract names: not the
// zero value, and not a number a newer peer sent that it does not know
// (protobuf keeps those as they came).
func (t PlanType) Known() bool { return known(PlanType_name, int32(t)) }

// Known reports whether s is a scope this code's contract names.
func (s CoverageScope) Known() bool { return known(CoverageScope_name, int32(s)) }

// Known reports whether s is a status this code's contract names.
func (s PlanStatus) Known() bool { return known(PlanStatus_name, int32(s)) }

func known(names map[int32]string, v int32) bool {
	_, ok := names[v]
	return ok && v != 0
}

// byShortName finds a value by its short name; every enum's zero value is
// UNSPECIFIED, which no short name parses to.
func byShortName(values map[string]int32, prefix, name string) (int32, bool) {
	v, ok := values[prefix+strings.ToUpper(name)]
	return v, ok && v != 0
}

func shortName(full, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(full, prefix))
}
