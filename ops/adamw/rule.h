// One AdamW step of one parameter element, updating param, exp_avg and
// exp_avg_sq in place (the C& arguments), as torch.optim.AdamW(fused=True)
// computes it: decoupled weight decay, then the moments, then the
// bias-corrected update. What depends on the scalars alone (the bias
// corrections, 1 - beta) is derived once per call, in double, by ops.toml's
// [derived] (the last arguments), not once per element. torch's fused kernel
// mixes double scalars into its float arithmetic; here everything is in the
// compute type C, hence the declared tolerance.
#pragma once
#include "element_math.h"

struct AdamW {
  template <typename C>
  CEE_HOST_DEVICE static void apply(C& param, C& exp_avg, C& exp_avg_sq, C grad,
                                    C lr, C step, C beta1, C beta2, C eps,
                                    C weight_decay, bool maximize, C keep,
                                    C one_minus_beta1, C one_minus_beta2,
                                    C step_size, C bias_correction2_sqrt) {
    (void)lr, (void)step, (void)weight_decay;  // in the derived scalars
    if (maximize) grad = -grad;
    param = param * keep;  // decoupled weight decay: p - lr * wd * p
    exp_avg = beta1 * exp_avg + one_minus_beta1 * grad;
    exp_avg_sq = beta2 * exp_avg_sq + one_minus_beta2 * grad * grad;
    const C denom = cee::sqrt(exp_avg_sq) / bias_correction2_sqrt + eps;
    param = param - step_size * exp_avg / denom;
  }
};
