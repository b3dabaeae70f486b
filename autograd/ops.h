// Every autograd op, for code that uses many of them.
#pragma once

#include "autograd/ops/elementwise.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/nn.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/shape_ops.h"
