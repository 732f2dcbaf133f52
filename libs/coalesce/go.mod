module github.com/esimplatform/esim/libs/coalesce

go 1.26
