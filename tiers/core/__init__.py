"""What every floor may use, beside the stores: so far the garbage collector held off during
bursts of short-lived objects (:mod:`tiers.core.collector`)."""
