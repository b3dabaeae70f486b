// Every autograd op, for code that uses many of them.
#pragma once

#include "halfgrad/autograd/ops/elementwise.h"
#include "halfgrad/autograd/ops/matmul.h"
#include "halfgrad/autograd/ops/nn.h"
#include "halfgrad/autograd/ops/reduce.h"
#include "halfgrad/autograd/ops/shape_ops.h"
