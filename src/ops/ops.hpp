// The serial reference layers, one include for all of them. Each is a forward/backward pair
// in the llm.c style: the forward saves what the backward needs as explicit arguments, the
// backward adds (+=) into every gradient, and the caller owns every buffer (no allocation).
#pragma once

#include "ops/attention.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/embedding.hpp"
#include "ops/flash_attention.hpp"
#include "ops/gelu.hpp"
#include "ops/layernorm.hpp"
#include "ops/linear.hpp"
#include "ops/residual.hpp"
#include "ops/rmsnorm.hpp"
#include "ops/rope.hpp"
#include "ops/swiglu.hpp"
