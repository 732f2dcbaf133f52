module github.com/esimplatform/esim/libs/devcerts

go 1.26.0
