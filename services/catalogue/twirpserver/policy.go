package twirpserver

import "github.com/esimplatform/esim/libs/internalauth"

// Policy is who may call each method: plans are read by the gateway (the
// public API), by ordering (to price an order) and by operators; only an
// operator changes the catalogue.
var Policy = internalauth.Policy{
	"ListPlans":   {internalauth.Gateway, internalauth.Ordering, internalauth.Operator},
	"GetPlan":     {internalauth.Gateway, internalauth.Ordering, internalauth.Operator},
	"GetPlans":    {internalauth.Gateway, internalauth.Ordering, internalauth.Operator},
	"UpsertPlans": {internalauth.Operator},
	"RetirePlan":  {internalauth.Operator},
}
