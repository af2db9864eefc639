import numpy as np
# The CPU model of the all-reduce set (model.py: inputs, partials, y digests); python3 zeros.py
import os
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'model.py')).read().split("targets =")[0])
f=np.float32
cases=[('A-2',796160,-3.6076304e-1,-4.246781e-2),('A-2',1039423,-3.5255226e-1,1.1638703e-1),('A-6',773696,3.149019e-1,-3.3281902e-3),('A-6',948479,4.6609813e-1,-7.468292e-3),('B-8',0,-2.5502807e-1,3.785348e-2),('B-8',4194303,-2.454451e-1,7.876859e-2),('two-2',809536,-2.7796214e-2,1.9795752e-1)]
for name,i,g0,g1 in cases:
    # if rank r's x is zero: p_r=0. y_r = 0.5*p_q ; y_q = 0.5*p_q + x_q
    print(name,i,'y0 if x0=0:',0.5*p[1][i],'got',g0,'| y1 if x0=0:',0.5*p[1][i]+x[1][i],'got',g1,'| y1 if x1=0:',0.5*p[0][i],'| y0 if x1=0',0.5*p[0][i]+x[0][i])
