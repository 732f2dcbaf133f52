module github.com/esimplatform/esim/libs/money

go 1.26.0
