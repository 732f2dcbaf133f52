package cataloguev1

import "testing"

func TestShortNames(t *testing.T) {
	for got, want := range map[string]string{
		PlanType_PLAN_TYPE_PER_DAY.ShortName():          "per_day",
		PlanType_PLAN_TYPE_FIXED.ShortName():            "fixed",
		CoverageScope_COVERAGE_SCOPE_GLOBAL.ShortName(): "global",
		PlanStatus_PLAN_STATUS_RETIRED.ShortName():      "retired",
		PlanType_PLAN_TYPE_UNSPECIFIED.ShortName():      "unspecified",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if pt, ok := PlanTypeByShortName("per_day"); !ok || pt != PlanType_PLAN_TYPE_PER_DAY {
		t.Errorf("per_day -> %v %v", pt, ok)
	}
	for _, bad := range []string{"", "unspecified", "bundle"} {
		if _, ok := PlanTypeByShortName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
		if _, ok := CoverageScopeByShortName(bad); ok {
			t.Errorf("scope %q parsed", bad)
		}
		if _, ok := PlanStatusByShortName(bad); ok {
			t.Errorf("status %q parsed", bad)
		}
	}
	if s, ok := CoverageScopeByShortName("region"); !ok || s != CoverageScope_COVERAGE_SCOPE_REGION {
		t.Errorf("region -> %v %v", s, ok)
	}
	if s, ok := PlanStatusByShortName("retired"); !ok || s != PlanStatus_PLAN_STATUS_RETIRED {
		t.Errorf("retired -> %v %v", s, ok)
	}
}
