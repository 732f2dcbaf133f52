module github.com/esimplatform/esim/charts

go 1.26

replace (
	github.com/esimplatform/esim/libs/config => ../libs/config
	github.com/esimplatform/esim/libs/httpserver => ../libs/httpserver
	github.com/esimplatform/esim/libs/postgres => ../libs/postgres
	github.com/esimplatform/esim/libs/telemetry => ../libs/telemetry
	github.com/esimplatform/esim/proto => ../proto
	github.com/esimplatform/esim/services/accounts => ../services/accounts
	github.com/esimplatform/esim/services/catalogue => ../services/catalogue
	github.com/esimplatform/esim/services/gateway => ../services/gateway
)
