module github.com/esimplatform/esim/libs/input

go 1.26.0
