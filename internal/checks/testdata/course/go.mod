module github.com/example/postgres-operator

go 1.24
