module github.com/deadlinebudget/budget/otelbudget/budgetopamp

go 1.26.0

replace github.com/deadlinebudget/budget => ../..

require github.com/deadlinebudget/budget v0.1.0

require github.com/stretchr/testify v1.12.1

require go.yaml.in/yaml/v3 v3.0.5 // indirect
